"""Side-by-side table of several benchmark runs (`kernel-agent bench compare DIR...`), after Kevin-32B's
Table 1 (arXiv 2507.11948): correctness best@k / avg@k, mean speedup best / avg, fast_1, with the
conditions each run was measured under. Speedups measured on different hardware do not compare, so
runs whose device names differ are refused unless the caller allows it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from evals.report import conditions_of
from evals.results_log import BenchError, ResultsLog


class CompareError(ValueError):
    """Runs that cannot be compared (missing files, different hardware)."""


@dataclass(frozen=True)
class RunSummary:
    name: str
    path: str
    metrics: dict[str, Any]
    bench: dict[str, Any]
    conditions: dict[str, list[str]]


def load_run(path: str) -> RunSummary:
    mpath = os.path.join(path, "metrics.json")
    if not os.path.exists(mpath):
        raise CompareError(f"{path}: no metrics.json (not a finished bench run)")
    with open(mpath, encoding="utf-8") as f:
        metrics = json.load(f)
    bench: dict[str, Any] = {}
    if os.path.exists(os.path.join(path, "config.json")):
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            bench = json.load(f).get("bench", {})
    try:
        records = ResultsLog(os.path.join(path, "results.jsonl")).read()
    except BenchError as e:
        raise CompareError(str(e)) from None
    name = os.path.basename(os.path.normpath(path))
    return RunSummary(name, path, metrics, bench, conditions_of(records))


def check_hardware(runs: Sequence[RunSummary], allow_mixed: bool = False) -> None:
    """Refuse runs measured on different devices (device name), unless `allow_mixed`."""
    names = {n for r in runs for n in r.conditions.get("device_name", [])}
    if len(names) > 1 and not allow_mixed:
        raise CompareError(f"runs were measured on different hardware ({'; '.join(sorted(names))}); "
                           f"pass --allow-mixed to compare anyway")


COLUMNS = ("run", "model", "tasks", "k x T", "correct best@k", "correct avg@k", "speedup best@k", "speedup avg@k",
           "geomean best", "fast_1", "fast_1 avg", "fast_1 vs compile", "device", "torch", "size", "policy")


def row(run: RunSummary) -> list[str]:
    s = run.metrics.get("overall", {})
    fe = s.get("fast_p", {}).get("eager", {})
    fa = s.get("fast_p_avg", {}).get("eager", {})
    fc = s.get("fast_p", {}).get("compile", {})
    c = run.conditions
    return [run.name, str(run.bench.get("model") or run.bench.get("backend", "")), str(s.get("tasks", 0)),
            f"{s.get('k', 0)}x{run.metrics.get('turns', 0)}", f"{s.get('correct_best@k', 0):.3f}",
            f"{s.get('correct_avg@k', 0):.3f}", f"{s.get('speedup_mean_best@k', 0):.2f}",
            f"{s.get('speedup_mean_avg@k', 0):.2f}", f"{s.get('speedup_geomean_best', 0):.2f}",
            f"{fe.get('fast_1', 0):.3f}", f"{fa.get('fast_1', 0):.3f}",
            f"{fc.get('fast_1', 0):.3f}" if s.get("compile_baseline_coverage") else "n/a",
            "; ".join(c.get("device_name", [])), "; ".join(c.get("torch_version", [])), "; ".join(c.get("size", [])),
            "; ".join(c.get("op_policy", []))]


def markdown(runs: Sequence[RunSummary]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(r)) + " |" for r in runs]
    return "\n".join(lines) + "\n"


def compare(paths: Sequence[str], allow_mixed: bool = False, out: str = "", show: bool = True) -> list[RunSummary]:
    """Load, check hardware, print a rich table, and write markdown (and JSON) to `out` when given."""
    runs = [load_run(p) for p in paths]
    check_hardware(runs, allow_mixed)
    if show:
        table = Table(title=f"{len(runs)} benchmark runs")
        for col in COLUMNS:
            table.add_column(col, overflow="fold")
        for r in runs:
            table.add_row(*row(r))
        Console().print(table)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(markdown(runs))
        with open(os.path.splitext(out)[0] + ".json", "w", encoding="utf-8") as f:
            json.dump([{"run": r.name, "path": r.path, "overall": r.metrics.get("overall", {}),
                        "conditions": r.conditions, "bench": r.bench} for r in runs], f, indent=1, sort_keys=True)
    return runs
