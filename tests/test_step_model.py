"""The step simulator (`train/step_model.py`, `scripts/simulate_step.py`): a schedule worked by hand, and the
CLI on a preset."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

from train.step_model import Latencies, StepShape, simulate

ROOT = Path(__file__).resolve().parents[1]


def test_one_rank_two_turns_matches_the_schedule_worked_by_hand():
    """Lockstep. Sync 1 s; turn 1 generated 1-11; compiles 11-14, 14-17 (one worker); runs 14-19, 19-24 (one
    slot); turn 2 generated 24-34; compiles 34-37, 37-40; runs 37-42, 42-47; update 7 s: a 54 s step, 20 s of it
    generating."""
    shape = StepShape(ranks=1, tasks_per_rank=1, trajectories=2, turns=2, compile_workers=1, run_slots=1,
                      streaming=False)
    lat = Latencies(compile_s=(3.0,), run_s=(5.0,), generate_call_s=(10.0,), update_s=(7.0,), sync_s=(1.0,))
    s = simulate(shape, lat, random.Random(0))
    assert (s.step_s, s.rollout_s, s.generate_s, s.evaluations) == (54.0, 46.0, 20.0, 4)
    assert math.isclose(s.eval_wait_share, 26 / 46) and math.isclose(s.train_gpu_idle_share, 26 / 54)
    assert math.isclose(s.run_slot_busy_share, 20 / 54)


def test_streamed_turns_match_the_schedule_worked_by_hand():
    """The same step streamed. Turn 1 generated 1-11; compiles 11-14, 14-17; runs 14-19, 19-24. Trajectory A's
    verdict at 19: its turn 2 generated 19-29; B's verdict at 24 waits for that call, generated 29-39. A's
    kernel compiled 29-32, run 32-37; B's compiled 39-42, run 42-47. The same 54 s step, 30 s of it generating:
    a call lasts as long whatever its size, so a third call is time the lockstep schedule did not spend."""
    shape = StepShape(ranks=1, tasks_per_rank=1, trajectories=2, turns=2, compile_workers=1, run_slots=1)
    lat = Latencies(compile_s=(3.0,), run_s=(5.0,), generate_call_s=(10.0,), update_s=(7.0,), sync_s=(1.0,))
    s = simulate(shape, lat, random.Random(0))
    assert (s.step_s, s.rollout_s, s.generate_s, s.evaluations) == (54.0, 46.0, 30.0, 4)
    assert math.isclose(s.eval_wait_share, 16 / 46)


def test_streaming_pays_when_verdicts_spread_wider_than_a_call_and_costs_when_calls_dominate():
    """4 trajectories x 3 turns, a worker and a slot each. Compiles of 1 or 20 s and 2 s calls: lockstep waits
    for a turn's slowest compile, streaming does not (shorter rollouts on average). Compiles of 1-3 s and
    30 s calls: streaming's extra calls cost more than the waits they save, and eval_wait_share falls anyway."""
    def rollout(streaming: bool, lat: Latencies) -> tuple[float, float]:
        sims = [simulate(StepShape(1, 1, 4, 3, 4, 4, streaming=streaming), lat, random.Random(k)) for k in range(20)]
        return sum(s.rollout_s for s in sims) / 20, sum(s.eval_wait_share for s in sims) / 20

    spread = Latencies(compile_s=(1.0, 20.0), run_s=(1.0,), generate_call_s=(2.0,))
    assert rollout(True, spread)[0] < rollout(False, spread)[0]
    calls = Latencies(compile_s=(1.0, 3.0), run_s=(1.0,), generate_call_s=(30.0,))
    (streamed, streamed_wait), (lockstep, lockstep_wait) = rollout(True, calls), rollout(False, calls)
    assert streamed > 1.3 * lockstep and streamed_wait < lockstep_wait


def test_a_rank_generates_another_group_while_the_first_is_evaluated():
    """Two task groups on one rank: the second group's call overlaps the first group's evaluations, so the
    rollout is shorter than two groups one after the other."""
    lat = Latencies(compile_s=(3.0,), run_s=(5.0,), generate_call_s=(10.0,))
    one = simulate(StepShape(1, 1, 2, 2, 1, 1, streaming=False), lat, random.Random(0))
    two = simulate(StepShape(1, 2, 2, 2, 1, 1, streaming=False), lat, random.Random(0))
    assert two.rollout_s < 2 * one.rollout_s and two.generate_s == 40.0


def test_shared_timing_gpus_are_a_queue_for_every_rank():
    """Four ranks on one shared run slot wait for each other; with a slot per rank they do not."""
    lat = Latencies(compile_s=(1.0,), run_s=(5.0,), generate_call_s=(2.0,))
    shared = simulate(StepShape(4, 1, 4, 1, 4, 1, shared_run=True), lat, random.Random(0))
    own = simulate(StepShape(4, 1, 4, 1, 4, 1, shared_run=False), lat, random.Random(0))
    assert shared.rollout_s == 2 + 1 + 16 * 5 and own.rollout_s == 2 + 1 + 4 * 5


def test_reused_verdicts_wait_for_their_twin_or_come_at_once():
    """Every completion a repeat of an earlier call's text: nothing is evaluated, the rollout is generation
    alone. Every one a repeat of a text first sent in the same call, bar the first: they wait for that one."""
    shape = StepShape(ranks=1, tasks_per_rank=1, trajectories=4, turns=1, compile_workers=4, run_slots=1)
    base = dict(compile_s=(3.0,), run_s=(5.0,), generate_call_s=(10.0,))
    earlier = simulate(shape, Latencies(**base, novel_share=0.0), random.Random(0))
    assert (earlier.rollout_s, earlier.evaluations, earlier.eval_wait_share) == (10.0, 0, 0.0)
    twins = simulate(shape, Latencies(**base, novel_share=0.0, same_call_share=1.0), random.Random(0))
    assert twins.evaluations == 0 and twins.rollout_s == 10.0  # no first text in the call: nothing to wait on
    one = simulate(shape, Latencies(**base, novel_share=0.5, same_call_share=0.5), random.Random(3))
    assert 1 <= one.evaluations <= 4 and one.rollout_s == 10.0 + 3.0 + 5.0 * one.evaluations


def test_cli_prints_the_8b_plan_and_a_sweep():
    out = subprocess.run([sys.executable, "scripts/simulate_step.py", "--config", "configs/qwen3-8b-8gpu.yaml",
                          "--gpus", "8", "--latencies", "configs/latency/h200-assumed.json", "--steps", "8", "--sweep"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    assert "4 rank(s) x 2 task(s) x 16 trajectories x 4 turns" in out and "eval_wait_share" in out
    assert "refused: tasks_per_batch" in out  # 7 training GPUs cannot split 8 tasks
