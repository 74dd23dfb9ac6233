"""`kernel-agent bench`: task specs, the results log, resume, baselines, compare, and (slow) a real CPU bench
of three tiny KernelBench-format tasks against the scripted chat-completions server, killed mid-run,
resumed, replayed, compared and swept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cli.main import main
from evals import baselines as bl
from evals.results_log import BenchError, BenchRecord, ResultsLog
from evals.runner import parse_task_spec, resolve_tasks, resume_jobs
from kernelbench.harness.result import Conditions, EvalResult
from kernelbench.tasks.task import Task
from tests.bench_records import bench_record
from tests.chat_server import ChatServer

REPO = Path(__file__).resolve().parents[1]

TASK = '''"""{marker}: {doc}"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}


rows = 64
cols = 256


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

TASKS = {"1_relu_max": ("TASK_RELU_A", "relu by torch.relu", "torch.relu(x)"),
         "2_relu_clamp": ("TASK_RELU_B", "relu by clamp", "x.clamp(min=0)"),
         "3_abs": ("TASK_ABS", "absolute value", "torch.abs(x)")}

KERNEL = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor {fn}(torch::Tensor x) {{
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat, "contiguous float32 only");
    torch::Tensor y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {{
        {body}
    }}
    return y;
}}
"""

ext = load_inline(name="bench_test_{fn}", cpp_sources=cpp_source, functions=["{fn}"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.{fn}(x.contiguous())
'''
RELU = KERNEL.format(fn="relu_fwd", body="out[i] = in[i] < 0.0f ? 0.0f : in[i];")
ABS = KERNEL.format(fn="abs_fwd", body="out[i] = in[i] < 0.0f ? -in[i] : in[i];")


def answer(code: str, summary: str) -> str:
    return f"<summary>{summary}</summary>\n\n```python\n{code}```\n"


NO_CODE = "<summary>thinking about it</summary>\nI would fuse the loop, but here is no code yet."

# Turn 0 differs per task; turn 1 always answers the relu kernel. Keyed by (task, turn) only, so that a
# resumed run (whose batches differ) gets the same answers.
TURN0 = {"TASK_RELU_A": NO_CODE, "TASK_RELU_B": answer(ABS, "abs loop"), "TASK_ABS": answer(ABS, "abs loop")}
EXPECTED = {("kb:L1/1_relu_max", 0): "format_error", ("kb:L1/1_relu_max", 1): "correct",
            ("kb:L1/2_relu_clamp", 0): "incorrect", ("kb:L1/2_relu_clamp", 1): "correct",
            ("kb:L1/3_abs", 0): "correct", ("kb:L1/3_abs", 1): "incorrect"}


def script(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    marker = next(m for m, _, _ in TASKS.values() if m in prompt)
    turn = prompt.count("### Attempt")
    return TURN0[marker] if turn == 0 else answer(RELU, "plain relu loop")


def write_tasks(root: Path) -> Path:
    folder = root / "level1"
    folder.mkdir(parents=True)
    for name, (marker, doc, expr) in TASKS.items():
        (folder / f"{name}.py").write_text(TASK.format(marker=marker, doc=doc, expr=expr))
    return root


# ---------------------------------------------------------------- fast unit tests

def test_task_spec_parses_selectors_from_the_right():
    assert parse_task_spec("builtin") == ("builtin", "heldout", 0)
    assert parse_task_spec("builtin:all") == ("builtin", "all", 0)
    assert parse_task_spec("kernelbench:/data/KB:train") == ("kernelbench:/data/KB", "train", 0)
    assert parse_task_spec("hf:ScalingIntelligence/KernelBench:level_2") == (
        "hf:ScalingIntelligence/KernelBench", "heldout", 2)
    assert parse_task_spec("hf:ScalingIntelligence/KernelBench:all:level_3") == (
        "hf:ScalingIntelligence/KernelBench", "all", 3)
    assert parse_task_spec("hf:x/y:level_1:extra") == ("hf:x/y", "extra", 1)
    for bad in ("nowhere", "builtin:bogus", ":heldout"):
        with pytest.raises(BenchError):
            parse_task_spec(bad)


def test_resolve_tasks_filters_and_limits(tmp_path):
    root = write_tasks(tmp_path / "kb")
    tasks = resolve_tasks(f"kernelbench:{root}:all", limit=2)
    assert [t.id for t in tasks] == ["kb:L1/1_relu_max", "kb:L1/2_relu_clamp"]
    with pytest.raises(BenchError, match="selects no task"):
        resolve_tasks(f"kernelbench:{root}:all", level=2)
    with pytest.raises(BenchError, match="contradicts"):
        resolve_tasks(f"kernelbench:{root}:all:level_1", level=2)


def _task() -> Task:
    return Task(id="kb:L1/1_relu_max", level=1, name="1_relu_max", origin="kernelbench:/x",
                source=TASK.format(marker="M", doc="d", expr="torch.relu(x)"))


def _record(task: Task, traj: str, turn: int, result: EvalResult, **fields) -> BenchRecord:
    return bench_record(task.id, traj, turn, result, level=task.level, origin=task.origin, **fields)


def test_results_log_cuts_a_torn_line_and_resume_rebuilds_history(tmp_path):
    log = ResultsLog(str(tmp_path / "results.jsonl"))
    task = _task()
    ok = EvalResult(status="correct", correct=True, speedup=1.5, feedback="1.5x faster")
    log.append(_record(task, "0", 0, EvalResult(status="format_error", feedback="no code"), candidate=""))
    log.append(_record(task, "0", 1, ok, candidate="code-1", summary="s1"))
    log.append(_record(task, "1", 1, ok, candidate="orphan"))    # turn 1 without turn 0: not history
    with open(log.path, "a") as f:
        f.write('{"task": "kb:L1/1_relu_max", "traj')                 # a kill mid-write
    assert len(log.read()) == 3 and not open(log.path).read().endswith("\n")   # a reader leaves the file alone
    records = log.load()
    assert len(records) == 3 and open(log.path).read().endswith("\n")
    log.append(_record(task, "1", 0, ok, candidate="c"))
    assert len(log.load()) == 4
    jobs = {job.traj_id: (job, left) for job, left in resume_jobs([task], 3, 3, records)}
    job0, left0 = jobs["0"]
    assert left0 == 1 and [t.candidate for t in job0.history] == ["", "code-1"]
    assert job0.history[1].summary == "s1" and job0.history[1].result.feedback == "1.5x faster"
    assert jobs["1"][1] == 3 and jobs["2"][1] == 3                   # nothing usable: run all turns
    assert not list(resume_jobs([task], 1, 2, records))              # traj 0 is finished at 2 turns


def _agent_record() -> BenchRecord:
    """A record as the agent run writes it: every field of the agent's set, a verdict with conditions."""
    cond = Conditions(device="cuda", device_name="GPU X", cpu_threads=4, input_seeds=(3, 4), sandbox="bwrap")
    result = EvalResult(status="correct", correct=True, runtime_ms=0.5, ref_runtime_ms=1.0, speedup=2.0,
                        flags=("suspicious_speedup",), feedback="2.0x", conditions=cond, sol_fraction=0.25)
    return _record(_task(), "3", 2, result, candidate="code", summary="tiled", response="<think>hm</think> code",
                   reasoning="why", compile_baseline="cached", finish_reason="stop", generate_s=1.5,
                   prompt_tokens=1000, completion_tokens=300, reasoning_tokens=120)


def test_bench_record_round_trips_exactly_and_writes_the_keys_it_always_wrote():
    rec = _agent_record()
    assert BenchRecord.from_dict(rec.to_dict()) == rec
    assert BenchRecord.from_dict(json.loads(rec.to_json())) == rec
    # The keys the agent run wrote before records were typed: a reader of those files reads these the same.
    assert set(rec.to_dict()) == {"task", "level", "origin", "trajectory", "turn", "candidate", "summary", "response",
                                  "reasoning", "compile_baseline", "result", "finish_reason", "generate_s",
                                  "prompt_tokens", "completion_tokens", "reasoning_tokens"}
    assert rec.to_dict()["result"] == rec.result.to_dict()
    replayed = replace(rec, finish_reason="", generate_s=0.0, prompt_tokens=0, completion_tokens=0,
                       reasoning_tokens=0, replayed_from="/runs/a", original_status="incorrect")
    assert BenchRecord.from_dict(json.loads(replayed.to_json())) == replayed
    assert "prompt_tokens" not in replayed.to_dict() and replayed.to_dict()["replayed_from"] == "/runs/a"


def test_bench_record_without_the_optional_fields_loads_them_as_not_recorded(tmp_path):
    line = {k: v for k, v in _agent_record().to_dict().items()
            if k not in ("finish_reason", "generate_s", "prompt_tokens", "completion_tokens", "reasoning_tokens")}
    (tmp_path / "results.jsonl").write_text(json.dumps(line) + "\n")
    (rec,) = ResultsLog(str(tmp_path / "results.jsonl")).load()
    assert (rec.finish_reason, rec.generate_s, rec.prompt_tokens, rec.completion_tokens, rec.reasoning_tokens,
            rec.replayed_from, rec.original_status) == ("", 0.0, 0, 0, 0, "", "")
    assert rec == replace(_agent_record(), finish_reason="", generate_s=0.0, prompt_tokens=0, completion_tokens=0,
                          reasoning_tokens=0)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(score=0.3), r"BenchRecord: missing fields \[\], unknown fields \['score'\]"),
    (lambda d: d.pop("turn"), r"BenchRecord: missing fields \['turn'\]"),
    (lambda d: d.pop("result"), r"BenchRecord: missing fields \['result'\]"),
    (lambda d: d.update(turn="2"), r"BenchRecord\.turn: expected int, got str"),
    (lambda d: d.update(turn=True), r"BenchRecord\.turn: expected int, got bool"),
    (lambda d: d.update(trajectory=3), r"BenchRecord\.trajectory: expected str, got int"),
    (lambda d: d.update(prompt_tokens=1.5), r"BenchRecord\.prompt_tokens: expected int, got float"),
    (lambda d: d.update(result="correct"), r"BenchRecord\.result: expected an object, got str"),
    (lambda d: d["result"].update(runtime_ms="fast"), r"BenchRecord\.result: EvalResult\.runtime_ms: expected float"),
    (lambda d: d["result"].update(status="great"), r"BenchRecord\.result: EvalResult: unknown status 'great'"),
])
def test_bench_record_refuses_what_it_did_not_write(change, message):
    d = json.loads(_agent_record().to_json())
    change(d)
    with pytest.raises(ValueError, match=message):
        BenchRecord.from_dict(d)


def test_results_log_names_a_bad_line_and_still_repairs_a_torn_last_one(tmp_path):
    log = ResultsLog(str(tmp_path / "results.jsonl"))
    good = _agent_record().to_json()
    (tmp_path / "results.jsonl").write_text("\n".join([good, "not json", good]) + "\n")
    for read in (log.load, log.read):
        with pytest.raises(BenchError, match=r"results\.jsonl, line 2: not a results\.jsonl record: Expecting value"):
            read()
    bad = json.loads(good)
    del bad["candidate"]
    (tmp_path / "results.jsonl").write_text("\n".join([good, good, json.dumps(bad), good]) + "\n")
    with pytest.raises(BenchError, match=r"line 3: .*missing fields \['candidate'\]"):
        log.load()
    (tmp_path / "results.jsonl").write_text(good + "\n" + good + "\n" + good[:40])   # a kill mid-write
    assert log.load() == [_agent_record()] * 2
    assert (tmp_path / "results.jsonl").read_text() == good + "\n" + good + "\n"


def test_compile_baseline_ratio_and_cache(tmp_path):
    base = bl.Baseline(task_id="t", source_sha="s", size="cpu", device_name="CPU X", torch_version="2",
                       eager_ms=2.0, compile_ms=1.0)
    res = EvalResult(status="correct", correct=True, runtime_ms=0.5, ref_runtime_ms=3.0, speedup=6.0)
    got, source = bl.apply_compile_baseline(res, base)
    assert source == "cached"
    assert got.compile_ref_runtime_ms == pytest.approx(1.5)         # this run's eager 3.0 ms x cached ratio 0.5
    assert got.speedup_vs_compile == pytest.approx(3.0)
    paired_res = replace(res, speedup=5.0)  # paired timing: the median of round ratios, not 3.0 / 0.5
    assert bl.apply_compile_baseline(paired_res, base)[0].speedup_vs_compile == pytest.approx(2.5)
    assert bl.apply_compile_baseline(res, None) == (res, "none")
    measured = EvalResult(status="correct", correct=True, runtime_ms=1.0, compile_ref_runtime_ms=2.0, speedup_vs_compile=2.0)
    assert bl.apply_compile_baseline(measured, base) == (measured, "measured")
    cache = bl.BaselineCache(str(tmp_path / "b.json"))
    cache.put(base)
    assert bl.BaselineCache(str(tmp_path / "b.json")).get(base.key) == base


def test_baseline_is_measured_once_then_cached(tmp_path, build_cache_dir):
    from kernelbench.harness.config import EvalConfig

    cfg = EvalConfig(timing_trials=5, build_cache_dir=build_cache_dir)
    cache = bl.BaselineCache(str(tmp_path / "baselines.json"))
    first, cached = bl.get_or_measure(_task(), cfg, cache, with_compile=False)
    assert not cached and first.eager_ms > 0 and first.device_name and first.torch_version
    again, cached = bl.get_or_measure(_task(), cfg, bl.BaselineCache(cache.path), with_compile=False)
    assert cached and again == first


def _fake_run(path: Path, device_name: str) -> str:
    path.mkdir()
    cond = Conditions(device_name=device_name, torch_version="2.13")
    rec = bench_record("A", "0", 0, EvalResult(status="correct", correct=True, speedup=1.2, conditions=cond))
    (path / "results.jsonl").write_text(rec.to_json() + "\n")
    from evals.metrics import compute_metrics

    (path / "metrics.json").write_text(json.dumps(compute_metrics([rec])))
    return str(path)


def test_compare_refuses_mixed_hardware(tmp_path, capsys):
    a, b = _fake_run(tmp_path / "a", "GPU A"), _fake_run(tmp_path / "b", "GPU B")
    assert main(["bench", "compare", a, b, "--out", str(tmp_path / "c.md")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "different hardware" in err
    assert main(["bench", "compare", a, b, "--allow-mixed", "--out", str(tmp_path / "c.md")]) == 0
    table = (tmp_path / "c.md").read_text()
    assert "GPU A" in table and "GPU B" in table


def test_model_server_refusal_is_exit_3_with_one_line(tmp_path, capsys):
    root = write_tasks(tmp_path / "kb")
    with ChatServer([{"status": 401, "error": "bad key"}]) as srv:
        code = main(["bench", "--tasks", f"kernelbench:{root}:all", "--limit", "1", "--backend", "openai",
                     "--base-url", srv.base_url, "--model", "m", "--trajectories", "1", "--turns", "1",
                     "--out", str(tmp_path / "run"), "--no-compile-baseline", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "401" in err[0] and "bad key" in err[0]


# ---------------------------------------------------------------- end to end (real compiles, real harness)

def _bench_args(tasks_root: Path, out: Path, url: str, cache: str) -> list[str]:
    return ["bench", "--tasks", f"kernelbench:{tasks_root}:all", "--backend", "openai", "--base-url", url,
            "--model", "scripted", "--trajectories", "1", "--turns", "2", "--device", "cpu", "--out", str(out),
            "--build-cache", cache, "--timing-trials", "10", "--no-compile-baseline", "--quiet"]


def _lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines(keepends=True) if ln.endswith("\n")] if path.exists() else []


def _records(lines: list[str]) -> list[BenchRecord]:
    return [BenchRecord.from_dict(json.loads(ln)) for ln in lines]


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory, build_cache_dir):
    """A bench run in a subprocess, SIGKILLed after some kernels were logged, then resumed in-process."""
    tmp = tmp_path_factory.mktemp("bench")
    tasks_root, out = write_tasks(tmp / "kb"), tmp / "run"
    with ChatServer(script) as srv:
        args = _bench_args(tasks_root, out, srv.base_url, build_cache_dir)
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=REPO, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        results = out / "results.jsonl"
        deadline = time.time() + 400
        while len(_lines(results)) < 3 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        output = proc.communicate()[0].decode(errors="replace")
        assert proc.returncode == -signal.SIGKILL, f"bench ended before it was killed:\n{output[-3000:]}"
        before = _lines(results)
        assert main([*args, "--resume"]) == 0
    return {"tmp": tmp, "tasks_root": tasks_root, "out": out, "before": before, "after": _lines(results),
            "cache": build_cache_dir}


@pytest.mark.slow
def test_killed_bench_resumes_without_redoing_or_losing_kernels(killed_and_resumed):
    before, after = killed_and_resumed["before"], killed_and_resumed["after"]
    assert 3 <= len(before) < 6
    assert after[:len(before)] == before                     # finished kernels kept as they were...
    keys = [(r.task, r.trajectory, r.turn) for r in _records(after)]
    assert len(keys) == len(set(keys)) == 6                  # ...none redone, none missing: 3 tasks x 1 x 2


@pytest.mark.slow
def test_bench_outputs_statuses_metrics_report(killed_and_resumed):
    out = killed_and_resumed["out"]
    records = _records(killed_and_resumed["after"])
    for rec in records:
        assert rec.result.status == EXPECTED[(rec.task, rec.turn)], rec.result.feedback
        if rec.result.status == "correct":
            assert rec.result.speedup > 0 and rec.result.conditions.device_name
    metrics = json.loads((out / "metrics.json").read_text())
    overall = metrics["overall"]
    assert set(overall["fast_p"]["eager"]) == {"fast_0", "fast_0.5", "fast_0.8", "fast_1", "fast_1.5", "fast_2"}
    assert set(overall["fast_p"]["compile"]) == set(overall["fast_p"]["eager"])
    assert overall["correct_best@k"] == pytest.approx(1.0)
    assert overall["fast_p"]["eager"]["fast_0"] == pytest.approx(1.0)
    assert [c["correct_best@k"] for c in metrics["per_turn"]] == pytest.approx([1 / 3, 1.0])
    assert metrics["status_counts"] == {"correct": 3, "format_error": 1, "incorrect": 2}
    config = json.loads((out / "config.json").read_text())
    assert config["bench"]["trajectories"] == 1 and len(config["tasks"]) == 3
    report = (out / "report.md").read_text()
    assert "fast_1" in report and "pass@k" in report
    # speed of light: every correct trajectory's kernel was timed against this CPU's roofline
    timed = [lvl for lvl in metrics["by_level"].values() if lvl["sol_fraction_trajectories"]]
    assert sum(lvl["sol_fraction_trajectories"] for lvl in timed) == overall["sol_fraction_trajectories"] == 3
    assert all(0 < lvl["sol_fraction_mean"] <= 1.05 for lvl in timed) and "## Speed of light" in report
    for png in ("speedup_distribution.png", "fast_p.png", "best_so_far.png", "speedup_vs_sol.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000 and png in report


@pytest.mark.slow
def test_replay_reproduces_statuses_and_compare_and_sweep(killed_and_resumed, tmp_path):
    src = killed_and_resumed["out"]
    replay_out = tmp_path / "replay"
    assert main(["bench", "--backend", "replay", "--from", str(src), "--out", str(replay_out), "--device", "cpu",
                 "--build-cache", killed_and_resumed["cache"], "--timing-trials", "10", "--no-compile-baseline",
                 "--quiet"]) == 0
    original = {(r.task, r.trajectory, r.turn): r.result.status for r in _records(killed_and_resumed["after"])}
    replayed = _records(_lines(replay_out / "results.jsonl"))
    assert {(r.task, r.trajectory, r.turn): r.result.status for r in replayed} == original
    assert all(r.replayed_from == str(src) for r in replayed)
    assert main(["bench", "compare", str(src), str(replay_out), "--out", str(tmp_path / "cmp.md")]) == 0
    assert (tmp_path / "cmp.md").read_text().count("scripted") == 1   # the replay has no model, only a backend
    assert main(["bench", "sweep", "--from", str(src), "--trajectories-grid", "1,2", "--turns-grid", "1,2",
                 "--quiet"]) == 0
    grid = json.loads((src / "sweep.json").read_text())["grid"]
    assert {(r["trajectories"], r["turns"]) for r in grid} == {(1, 1), (1, 2)}   # n=2 > the run's 1: left out
    assert (src / "scaling.png").read_bytes()[:4] == b"\x89PNG"
