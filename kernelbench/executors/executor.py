"""Which executor evaluates candidates: `local` (threads on this machine) or `ray` (actors on a Ray cluster).

    evaluator = make_evaluator(EvalConfig(device="cuda"), executor="ray", ray_address="auto",
                               compile_workers=16, run_workers=8, max_in_flight=64)

Both give the `Evaluator` interface (`submit(task, src) -> Future[EvalResult]`, `evaluate_many`, `close`,
context manager) and the same verdicts, so the episode, bench and training code never ask which one runs.
`kernel-agent bench`, `optimize` and `train` build theirs here (`--executor`, `--ray-address`); docs/cluster.md
shows a multi-node setup.
"""

from __future__ import annotations

from typing import Any

from kernelbench.harness.config import EvalConfig

EXECUTORS = ("local", "ray")


def make_evaluator(config: EvalConfig, *, executor: str = "local", ray_address: str = "", compile_workers: int = 2,
                   run_workers: int = 1, max_in_flight: int = 0) -> Any:
    """An evaluator for `executor`. `ray_address` (ray only): empty starts a local Ray, `auto` attaches to the
    cluster this machine joined with `ray start`, `HOST:6379` or `ray://HOST:10001` to that cluster.
    `max_in_flight` > 0: `submit` blocks while that many evaluations are unfinished (0: no bound)."""
    if executor == "local":
        from kernelbench.executors.evaluator import Evaluator

        return Evaluator(config, compile_workers=compile_workers, run_workers=run_workers, max_in_flight=max_in_flight)
    if executor == "ray":
        from kernelbench.executors.ray_evaluator import RayEvaluator

        return RayEvaluator(config, compile_workers=compile_workers, run_workers=run_workers,
                            max_in_flight=max_in_flight, address=ray_address)
    raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
