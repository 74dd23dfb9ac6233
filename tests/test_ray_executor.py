"""The Ray executor: the same verdicts as the local one, lost actors retried, back-pressure, shipped builds.

A local Ray (2 CPUs, a small object store) starts once for the module. The correct candidate is the
reference C++ ReLU of kernelbench/tasks/solutions/cpu on the small ReLU fixture task; it builds once per test
session in `build_cache_dir` (the local run below builds it, the Ray run finds it), and the other
candidates share that build or build nothing, so most of the cost is run stages (a few seconds each).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import ray

from cli.main import main
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import compile_stage
from kernelbench.executors.evaluator import Evaluator
from kernelbench.executors.executor import ExecutorConfig, make_evaluator
from kernelbench.harness.result import EvalResult
from kernelbench.executors.ray_evaluator import RayEvaluator, RunWorker
from kernelbench.executors.shipment import pack_entry, unpack_entry
from kernelbench.tasks.task import Task

ROOT = Path(__file__).resolve().parent.parent
RELU = Task(id="test/relu", level=1, name="relu", origin="test",
            source=(ROOT / "tests" / "fixtures" / "core" / "relu_task.py").read_text())
CORRECT = (ROOT / "kernelbench" / "tasks" / "solutions" / "cpu" / "L1" / "01_relu.py").read_text()
CALL = "        return ext.relu_forward(x)"
TORCH_OP = CORRECT.replace(CALL, "        return torch.relu(ext.relu_forward(x))")  # same build; rejected at run time
FALLBACK = CORRECT.replace(CALL, "        try:\n    " + CALL + "\n        except RuntimeError:\n"
                                  "            return torch.relu(x)")  # a try/except fallback: rejected statically
COMPILE_ERROR = (ROOT / "tests" / "fixtures" / "core" / "relu_compile_error.py").read_text()
NO_MODEL = "import torch\n\nx = 1\n"


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 1024 * 1024, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def cfg(build_cache_dir) -> EvalConfig:
    return EvalConfig(build_cache_dir=build_cache_dir, correctness_trials=2, extra_distribution_trials=1,
                      warmup_trials=1, timing_trials=5, run_timeout_s=90)


def verdict(r) -> tuple:
    return r.status, r.correct, r.compiled, r.flags


def wait_for(probe, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def test_ray_and_local_executors_give_the_same_verdicts(cluster, cfg):
    items = [(RELU, src) for src in (CORRECT, TORCH_OP, FALLBACK, COMPILE_ERROR, NO_MODEL)]
    with make_evaluator(cfg, ExecutorConfig(kind="local", compile_workers=1, run_workers=1)) as ev:
        local = ev.evaluate_many(items)
    with make_evaluator(cfg, ExecutorConfig(kind="ray", compile_workers=1, run_workers=1)) as ev:
        assert isinstance(ev, RayEvaluator)
        remote = ev.evaluate_many(items)
    assert [r.status for r in local] == ["correct", "rejected", "rejected", "compile_error", "format_error"], \
        [r.feedback for r in local]
    assert [verdict(r) for r in remote] == [verdict(r) for r in local]
    assert any(f.startswith("dynamic:") for f in remote[1].flags) and "static:try_except" in remote[2].flags
    assert remote[0].speedup > 0 and remote[0].conditions.sandbox == local[0].conditions.sandbox
    assert all(r.retries == 0 for r in local + remote)


def test_a_killed_run_actor_is_replaced_and_its_job_retried_once(cluster, cfg):
    settled: list[int] = []
    lock = threading.Lock()

    def count(fut):
        with lock:
            settled.append(id(fut))

    with RayEvaluator(cfg, compile_workers=1, run_workers=1) as ev:
        futures = [ev.submit(RELU, CORRECT) for _ in range(3)]
        for f in futures:
            f.add_done_callback(count)
        pid = wait_for(lambda: next((p for stage, p, _ in ev.running() if stage == "run"), 0))
        os.kill(pid, signal.SIGKILL)  # the actor process, mid run stage
        results = [f.result(timeout=300) for f in futures]
        retried = ev.retried
    assert [r.status for r in results] == ["correct"] * 3, [r.feedback for r in results]
    assert sorted(r.retries for r in results) == [0, 0, 1] and retried == 1
    assert sorted(settled) == sorted(id(f) for f in futures)  # each settled exactly once
    again = [EvalResult.from_dict(r.to_dict()) for r in results]  # retries survive results.jsonl; old records load
    older = {k: v for k, v in results[0].to_dict().items() if k != "retries"}  # a record written before `retries`
    assert again == results and EvalResult.from_dict(older).retries == 0


def test_retries_are_bounded_then_a_harness_fault_is_recorded(cluster, cfg):
    fresh = CORRECT + f"\n# {secrets.token_hex(4)}: a new file on the same build (the compile stage imports it)\n"
    with RayEvaluator(cfg, compile_workers=1, run_workers=1, max_retries=0) as ev:
        future = ev.submit(RELU, fresh)
        actor = wait_for(lambda: next((a for stage, _, a in ev.running() if stage == "compile"), None))
        ray.kill(actor, no_restart=True)
        result = future.result(timeout=300)
    assert result.status == "harness_error" and result.flags == () and result.retries == 0
    assert "lost the worker" in result.feedback


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_back_pressure_bounds_unfinished_evaluations(cluster, cfg, executor):
    """Instrumented from outside: +1 when submit returns, -1 when the verdict arrives; the peak must stay
    within the bound, and without a bound the same burst must exceed it (so the probe can fail)."""
    items = [(RELU, NO_MODEL if i % 2 else FALLBACK) for i in range(10)]

    def peak(bound: int) -> int:
        now, top, lock = [0], [0], threading.Lock()

        def done(_):
            with lock:
                now[0] -= 1

        with make_evaluator(cfg, ExecutorConfig(kind=executor, compile_workers=1, run_workers=1, max_in_flight=bound)) as ev:
            if executor == "ray":
                ev.wait_ready()
            futures = []
            for task, src in items:
                fut = ev.submit(task, src)
                with lock:
                    now[0] += 1
                    top[0] = max(top[0], now[0])
                fut.add_done_callback(done)
                futures.append(fut)
            assert {f.result(timeout=120).status for f in futures} == {"format_error", "rejected"}
        return top[0]

    assert peak(2) <= 2
    assert peak(0) > 2


def test_a_shipped_build_is_usable_on_a_node_without_it(cfg, tmp_path):
    """Another node's view: the cache entry is absent; the shipment recreates it, up to date for ninja."""
    staged = compile_stage(RELU, CORRECT, cfg)
    assert staged.decided is None, staged.decided
    shipment = pack_entry(staged)
    entry = Path(staged.build.entry_dir)
    shutil.move(entry, tmp_path / "elsewhere")
    assert unpack_entry(shipment) and not unpack_entry(shipment)  # the second finds it present
    for ext in (entry / "ext").iterdir():
        dry = subprocess.run(["ninja", "-n", "-C", str(ext)], capture_output=True, text=True)
        assert "no work to do" in dry.stdout, dry.stdout + dry.stderr
    result = RunWorker().run(replace(shipment, artifact=b""))
    assert result.status == "correct", result.feedback


def test_a_group_shares_its_seeds_on_a_run_actor(cluster, cfg):
    """`submit(..., group=)` reaches the run actor: a group's candidates are judged on one seed set (one
    reference child there, off paired timing), a candidate outside it on its own."""
    sequential = replace(cfg, timing_rounds=0)
    with RayEvaluator(sequential, compile_workers=1, run_workers=1) as ev:
        futures = [ev.submit(RELU, src, group="step0/relu") for src in (CORRECT, TORCH_OP, CORRECT)]
        alone = ev.submit(RELU, CORRECT).result()
        results = [f.result() for f in futures]
    assert [verdict(r)[0] for r in results] == ["correct", "rejected", "correct"]
    seeds = {(r.conditions.init_seed, r.conditions.input_seeds) for r in results}
    assert len(seeds) == 1 and (alone.conditions.init_seed, alone.conditions.input_seeds) not in seeds


@pytest.mark.parametrize("argv", [
    ["bench", "--executor", "threads"],
    ["optimize", "m.py", "--executor", "dask", "--base-url", "http://x/v1"],
    ["train", "--preset", "cpu-tiny", "--executor", "slurm"],
])
def test_a_bad_executor_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "--executor" in capsys.readouterr().err


def test_executor_flags_reach_the_configs(tmp_path):
    from cli.bench_cmd import config_from
    from cli.main import build_parser

    argv = ["bench", "--executor", "ray", "--ray-address", "auto", "--max-in-flight", "8"]
    cfg = config_from(build_parser(argv)[0].parse_args(argv))
    assert (cfg.executor.kind, cfg.executor.ray_address, cfg.executor.max_in_flight) == ("ray", "auto", 8)
    args = build_parser(["optimize"])[0].parse_args(["optimize", "m.py", "--executor", "ray", "--run-workers", "8"])
    assert (args.executor, args.run_workers, args.ray_address) == ("ray", 8, "")
    preset = tmp_path / "p.yaml"
    preset.write_text("# kernel-agent train --config p.yaml\ntrain:\n  executor:\n    kind: slurm\n")
    assert main(["train", "--config", str(preset)]) == 2
    with pytest.raises(ValueError):
        make_evaluator(EvalConfig(), ExecutorConfig(kind="slurm"))
    with pytest.raises(ValueError):
        Evaluator(EvalConfig(), max_in_flight=-1)
