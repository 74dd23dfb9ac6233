"""Preflight: before any model work, a job checks that its judge is sound (DESIGN.md, "The harness: rules" 6).

A known-good built-in solution (the ReLU of `kernelbench/tasks/solutions/<device>/L1/01_relu.py`) is evaluated on
the configured device through the configured executor, correctness only (no timing: the question is
whether the harness can judge at all, and timing on a busy machine is noise). Anything but `correct` stops
the job with `PreflightFailed`, naming the status and the harness's words: a clone whose children cannot
import the project, a sandbox that cannot start the interpreter, a broken compiler. Cold, the check compiles
one small extension (about 15-30 s on 2 cores); afterwards the build cache serves it in seconds.

    preflight(EvalConfig(device="cpu"))                    # raises PreflightFailed, else returns the result
"""

from __future__ import annotations

import time
from dataclasses import replace

from kernelbench.executors.evaluator import HarnessBroken
from kernelbench.executors.executor import ExecutorConfig, make_evaluator
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.result import CORRECT, EvalResult
from kernelbench.tasks.catalog import find_task
from kernelbench.tasks.solutions import find_solution

KNOWN_GOOD_TASK = "L1/01_relu"
TIMEOUT_S = 600.0
"""Bound on the wait for the preflight verdict (a cold CUDA compile takes a minute or two)."""


class PreflightFailed(HarnessBroken):
    """The known-good solution was not judged `correct`: the harness cannot be trusted to judge this job."""


def known_good(device: str) -> tuple[object, str]:
    """(task, solution text) of the built-in known-good solution for `device`."""

    solution = find_solution(KNOWN_GOOD_TASK, "cuda" if device == "cuda" else "cpu")
    with open(solution.path, encoding="utf-8") as f:
        return find_task(KNOWN_GOOD_TASK, "builtin"), f.read()


def preflight_config(config: EvalConfig) -> EvalConfig:
    """`config` with timing off: the check asks whether the harness judges correctly, not how fast."""
    return replace(config, timing_trials=0, time_compile_baseline=False, op_policy="")


def preflight(config: EvalConfig, *, executor: str = "local", ray_address: str = "", evaluator=None,
              say=None) -> EvalResult:
    """Evaluate the known-good solution with `config` (through `evaluator`, else a fresh one of `executor`);
    return its result when `correct`, else raise `PreflightFailed` naming what the harness said."""
    task, src = known_good(config.device)
    cfg = preflight_config(config)
    start = time.perf_counter()
    try:
        if evaluator is not None:
            result = evaluator.submit(task, src, cfg).result(timeout=TIMEOUT_S)
        else:
            with make_evaluator(cfg, ExecutorConfig(kind=executor, ray_address=ray_address, compile_workers=1)) as ev:
                result = ev.submit(task, src).result(timeout=TIMEOUT_S)
    except PreflightFailed:
        raise
    except Exception as e:  # HarnessBroken, a Ray failure, a timeout: the judge is not usable
        raise PreflightFailed(f"preflight: the harness could not judge the known-good solution of {task.id} "
                              f"({config.device}): {type(e).__name__}: {e}") from e
    if result.status != CORRECT or not result.correct:
        why = " ".join(result.feedback.split())[:800]
        raise PreflightFailed(f"preflight: the known-good solution of {task.id} on {config.device} was judged "
                              f"{result.status}, not correct: the harness cannot be trusted here. {why}")
    if say is not None:
        say(f"preflight: known-good {task.id} judged correct on {config.device} ({time.perf_counter() - start:.0f} s)")
    return result
