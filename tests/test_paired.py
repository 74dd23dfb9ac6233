"""Paired timing, parent side (`kernelbench.paired`) and its use by `evaluate` on CPU."""

from __future__ import annotations

import os
import time

import pytest

from kernelbench import paired


def test_plan_splits_trials_into_rounds():
    assert paired.plan(100, 10, 30.0, 0.5, 0.8) == paired.Plan(10, 10)
    assert paired.plan(100, 7, 30.0, 0.5, 0.8) == paired.Plan(7, 15)  # at least the asked trials
    assert paired.plan(3, 10, 30.0, 0.5, 0.8) == paired.Plan(3, 1)


def test_plan_shrinks_for_slow_calls_within_the_budget():
    # a 30 s budget per side: 1 s per call fits 3 calls per block, 2 s per call 1
    assert paired.plan(100, 10, 30.0, 1000.0, 10.0) == paired.Plan(10, 3)
    assert paired.plan(100, 10, 30.0, 2000.0, 10.0) == paired.Plan(10, 1)
    assert paired.plan(100, 10, 30.0, 5000.0, 10.0) == paired.Plan(6, 1)  # fewer rounds
    assert paired.plan(100, 10, 30.0, 20000.0, 10.0) == paired.Plan(5, 1)  # far too slow: still 5 rounds of 1


def test_ready_line_parsing():
    assert paired.ready_ms("ready 0.250000") == 0.25
    for bad in ("", "ready", "ready x", "ready nan", "ready -1", "done", "ready 1 2", "READY 1"):
        assert paired.ready_ms(bad) is None


def test_block_medians_need_exactly_the_rounds():
    assert paired.block_medians([[1.0, 3.0, 2.0], [4.0]], 2) == [2.0, 4.0]
    assert paired.block_medians([[1.0], [4.0]], 3) is None
    assert paired.block_medians([[1.0], []], 2) is None
    assert paired.block_medians([["x"], [1.0]], 2) is None
    assert paired.block_medians("nope", 1) is None


def test_overruns_bound_reported_times_by_the_parents_clock():
    assert paired.overruns([[1.0, 2.0], [3.0]], (0.004, 0.004)) == ""
    assert "block 1" in paired.overruns([[1.0, 2.0], [5.0]], (0.004, 0.004))
    assert "block 0" in paired.overruns([[float("nan")]], (0.004,))
    assert "malformed" in paired.overruns([["x"]], (0.004,))
    assert "reported 1" in paired.overruns([[1.0]], (0.1, 0.1))


def test_unaccounted_time_catches_times_reported_too_low():
    # each block: 10 trials of 1 ms in 12 ms of wall time (2 ms of untimed input loading) on both sides
    ref, walls = [[1.0] * 10] * 6, (0.012,) * 6
    assert paired.unaccounted(ref, walls, [[1.0] * 10] * 6, (0.012,) * 6) == ""
    assert paired.unaccounted(ref, walls, [[1.2] * 10] * 6, (0.0145,) * 6) == ""  # a slower honest kernel
    # the candidate claims 0.1 ms per trial but its blocks took as long as honest 1 ms trials
    lie = paired.unaccounted(ref, walls, [[0.1] * 10] * 6, (0.012,) * 6)
    assert "account for 1.000 ms of the 12.000 ms" in lie
    # one block hit by a 30 ms scheduling hiccup outside the trials: the median over blocks ignores it
    assert paired.unaccounted(ref, walls, [[1.0] * 10] * 6, (0.042,) + (0.012,) * 5) == ""
    assert paired.unaccounted(ref, walls, [["x"]] * 6, (0.012,) * 6) == "malformed timing blocks"
    assert paired.unaccounted(ref, walls, [[1.0]] * 2, (0.012,) * 6) == "malformed timing blocks"
    assert paired.unaccounted([], (), [], ()) == ""


def test_paired_speedup_is_the_median_of_round_ratios():
    # drift that moves both sides together cancels: every round is 2x
    assert paired.paired_speedup([2.0, 4.0, 8.0], [1.0, 2.0, 4.0]) == 2.0
    assert paired.paired_speedup([2.0, 2.0, 2.0], [1.0, 1.0, 20.0]) == 2.0  # one disturbed round does not move it
    assert paired.paired_speedup([], []) == 0.0


def test_pipes_lines_eof_deadline_and_long_lines():
    p = paired.Pipes()
    try:
        os.write(p.reply_write, b"ready 1.5\ndo")
        assert p.receive(time.perf_counter() + 5) == "ready 1.5"
        start = time.perf_counter()
        assert p.receive(time.perf_counter() + 0.2) == ""  # no newline before the deadline
        assert 0.15 < time.perf_counter() - start < 2
        os.write(p.reply_write, b"ne\n")
        assert p.receive(time.perf_counter() + 5) == "done"
        os.write(p.reply_write, b"x" * 200)
        assert p.receive(time.perf_counter() + 5) == ""  # a flood is not a line
    finally:
        p.close()
    q = paired.Pipes()
    q.started()  # the child's ends closed: nobody writes any more
    assert q.receive(time.perf_counter() + 5) == ""
    q.close()
    assert q.send("T 1") is False  # closed: no exception, just False


@pytest.fixture(scope="module")
def relu():
    from pathlib import Path

    from kernelbench.task import Task

    fixtures = Path(__file__).parent / "fixtures" / "core"
    task = Task(id="test/relu", level=1, name="relu", origin="test", source=(fixtures / "relu_task.py").read_text())
    return task, (fixtures / "relu_ok.py").read_text()


def test_evaluate_times_in_rounds_on_cpu_and_one_after_the_other_when_off(relu):
    from kernelbench.config import EvalConfig
    from kernelbench.evaluate import evaluate

    task, src = relu
    r = evaluate(task, src, EvalConfig(device="cpu", timing_rounds=4, timing_trials=20))
    assert r.status == "correct" and r.flags == ()
    assert r.conditions.timing_rounds == 4 and r.conditions.timing_trials == 20
    assert r.speedup > 0 and r.runtime_ms > 0 and r.ref_runtime_ms > 0
    s = evaluate(task, src, EvalConfig(device="cpu", timing_rounds=0, timing_trials=20))
    assert s.status == "correct" and s.conditions.timing_rounds == 0
    assert s.speedup == pytest.approx(s.ref_runtime_ms / s.runtime_ms)  # one after the other: ratio of medians


def test_speedup_against_torch_compile_scales_the_paired_speedup(relu):
    """With the torch.compile baseline on, the reference times it after the candidate exits; the kernel's
    speedup against it is the paired speedup times compiled/eager from that one process (not a ratio of
    medians taken in two processes, which would throw the pairing away)."""
    from kernelbench.config import EvalConfig
    from kernelbench.evaluate import evaluate

    task, src = relu
    r = evaluate(task, src, EvalConfig(device="cpu", timing_rounds=4, timing_trials=20, time_compile_baseline=True))
    assert r.status == "correct" and r.conditions.timing_rounds == 4
    assert r.compile_ref_runtime_ms > 0
    assert r.speedup_vs_compile == pytest.approx(r.speedup * r.compile_ref_runtime_ms / r.ref_runtime_ms)


def test_hidden_checks_run_among_the_trials_on_the_given_scales():
    """timing.Measurement: each check is one untimed call on set k scaled by g, placed before a random trial
    (left-over ones in the verification round), and its kept output is that call's."""
    import torch

    from kernelbench import timing

    seen: list[float] = []

    def fn(x):
        seen.append(float(x[0]))
        return x * 2

    sets = [[torch.ones(4)], [torch.full((4,), 3.0)]]
    checks = [(0, 0.75), (1, 1.5), (0, 1.25)]
    m = timing.Measurement(fn, sets, "cpu", keep=lambda o: o.clone(), checks=checks, planned_trials=8)
    m.warm_up(2)
    m.block(4)
    m.block(4)
    m.verify()
    assert len(seen) == 2 + 8 + 3 + 2 and len(m.times_ms) == 8
    assert [float(o[0]) for o in m.check_outputs] == [1.5, 9.0, 2.5]  # 2 x (base x g)
    for value in (0.75, 4.5, 1.25):  # each check's input appears once, among the calls before verification
        assert seen[:-2].count(value) >= 1
    # more checks than trials: the rest run in the verification round, none is lost
    m2 = timing.Measurement(fn, sets, "cpu", keep=lambda o: o.clone(), checks=checks, planned_trials=1)
    m2.block(1)
    m2.verify()
    assert all(o is not None for o in m2.check_outputs)
