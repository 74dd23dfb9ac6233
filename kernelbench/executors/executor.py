"""Which executor evaluates candidates: `local` (threads on this machine) or `ray` (actors on a Ray cluster).

    evaluator = make_evaluator(EvalConfig(device="cuda"), ExecutorConfig(kind="ray", ray_address="auto",
                               compile_workers=16, run_workers=8, max_in_flight=64))

Both give the `Evaluator` interface (`submit(task, src) -> Future[EvalResult]`, `evaluate_many`, `close`,
context manager) and the same verdicts, so the episode, bench and training code never ask which one runs.
`kernel-agent bench`, `optimize` and `train` build theirs here from their `executor` settings (`--executor`,
`--ray-address`, `--max-in-flight`); docs/cluster.md shows a multi-node setup.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from kernelbench.harness.config import EvalConfig

# Imports inside functions: the evaluators import torch (and Ray's, ray); `ExecutorConfig` loads without them
# (train.config, evals.runner).

ExecutorKind = Literal["local", "ray"]
EXECUTORS = get_args(ExecutorKind)


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class ExecutorConfig:
    """Where and how widely a run's evaluations execute (the `executor` section of train, bench and optimize)."""

    kind: ExecutorKind = "local"
    """`local` (threads on this machine) or `ray` (compile actors on CPU nodes, run actors one per GPU on
    evaluation nodes; see docs/cluster.md)."""
    ray_address: str = ""
    """Ray cluster for `kind: ray`: empty starts a local Ray, `auto` joins the cluster this machine is part of,
    `HOST:6379` or `ray://HOST:10001` that cluster."""
    compile_workers: int = 2
    """Parallel compile jobs (threads locally, CPU actors on Ray)."""
    run_workers: int = 1
    """Parallel run (correctness + timing) jobs: one per GPU; one on CPU, where paired timings take turns
    machine-wide anyway (`slots.TimingLease`) and a second run worker only overlaps untimed work with another's
    rounds (measured in docs/harness.md, "Timing": more evaluations a minute, a wider spread on memory-bound
    kernels) (threads locally, GPU actors on Ray)."""
    max_in_flight: int = Field(0, ge=0)
    """Most unfinished evaluations at once; submitting more waits (0: no bound)."""
    gpus: tuple[str, ...] = ()
    """Local, CUDA: the GPUs the run workers time on (`CUDA_VISIBLE_DEVICES` entries), one run worker each,
    each run holding its GPU exclusively across every process of the machine (`gpu_lease`); empty: the run
    workers share this process's view. A training run sets it from its layout (`train.layout`)."""


def make_evaluator(config: EvalConfig, executor: ExecutorConfig = ExecutorConfig()) -> Any:
    """An evaluator of `executor.kind`; with `executor.max_in_flight` > 0, `submit` blocks while that many
    evaluations are unfinished."""
    ex = executor
    if ex.kind == "local":
        from kernelbench.executors.evaluator import Evaluator

        return Evaluator(config, compile_workers=ex.compile_workers, run_workers=len(ex.gpus) or ex.run_workers,
                         max_in_flight=ex.max_in_flight, gpus=ex.gpus)
    if ex.kind == "ray":
        from kernelbench.executors.ray_evaluator import RayEvaluator

        return RayEvaluator(config, compile_workers=ex.compile_workers, run_workers=ex.run_workers,
                            max_in_flight=ex.max_in_flight, address=ex.ray_address)
    raise AssertionError(f"ExecutorConfig.kind {ex.kind!r} passed validation")  # the Literal admits no other
