"""`BenchRecord`s for the tests of what reads a bench run (metrics, report, compare, view, resume): a test names
the fields it is about; the others are what a record of an empty answer holds."""

from __future__ import annotations

from typing import Any

from evals.results_log import BenchRecord
from kernelbench.harness.result import EvalResult


def bench_record(task: str, traj: int | str, turn: int, result: EvalResult, *, level: int = 1,
                 **fields: Any) -> BenchRecord:
    """A record of kernel (task, traj, turn) judged `result`; `fields` sets any other field (candidate, tokens...)."""
    base: dict[str, Any] = {"origin": "builtin", "candidate": "", "summary": "", "response": "", "reasoning": "",
                            "compile_baseline": "none"}
    return BenchRecord(task=task, level=level, trajectory=str(traj), turn=turn, result=result, **{**base, **fields})
