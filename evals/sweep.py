"""Test-time scaling over trajectories × turns (`kernel-agent bench sweep`).

The grid is computed from ONE run of max(N) trajectories × max(T) turns rather than one run per cell:
a cell (n, t) keeps the first t turns of every trajectory (a trajectory's first t turns are exactly what
a t-turn run would have produced, since turn t never sees later turns) and takes best@n as the exact
expectation over all n-subsets of the run's trajectories (`evals.metrics.expected_best_of_k`). That is
the unbiased pass@k idea applied to every metric, and costs nothing beyond the one run. Kevin-32B
(arXiv 2507.11948) compares budgets this way: for a fixed n·t, more turns beat more trajectories.
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from evals.metrics import summarize, trajectory_outcomes
from evals.results_log import BenchRecord

# Imports inside functions: matplotlib (0.4 s to import) loads when a figure is drawn, not when this module is
# imported for its records and helpers.


def parse_grid(text: str) -> list[int]:
    """`1,2,4,8` -> [1, 2, 4, 8] (sorted, unique, positive)."""
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"grid {text!r} must be comma-separated integers") from None
    if not values or values[0] < 1:
        raise ValueError(f"grid {text!r} must hold positive integers")
    return values


def scaling_grid(records: Sequence[BenchRecord], trajectories: Sequence[int],
                 turns: Sequence[int]) -> list[dict[str, Any]]:
    """One row per (n, t): correctness best@n / avg, mean speedup best@n, fast_1 best@n, budget n·t."""
    rows = []
    for t in turns:
        outcomes = trajectory_outcomes(records, max_turns=t)
        have = min((len(o) for o in outcomes.values()), default=0)
        for n in trajectories:
            if n > have:
                continue
            s = summarize(outcomes, k=n)
            rows.append({"trajectories": n, "turns": t, "budget": n * t,
                         "correct_best@k": s["correct_best@k"], "correct_avg@k": s["correct_avg@k"],
                         "speedup_mean_best@k": s["speedup_mean_best@k"],
                         "speedup_geomean_best": s["speedup_geomean_best"],
                         "fast_1": s["fast_p"]["eager"]["fast_1"]})
    return rows


def plot_scaling(rows: Sequence[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    for t in sorted({r["turns"] for r in rows}):
        line = sorted((r for r in rows if r["turns"] == t), key=lambda r: r["budget"])
        budget = [r["budget"] for r in line]
        a.plot(budget, [r["speedup_mean_best@k"] for r in line], marker="o", label=f"{t} turns")
        b.plot(budget, [r["fast_1"] for r in line], marker="o", label=f"{t} turns")
    for ax, ylabel in ((a, "mean speedup best@n"), (b, "fast_1 best@n")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("kernels per task (n trajectories x t turns)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    fig.suptitle("Test-time scaling: trajectories x turns")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["## Test-time scaling (trajectories x turns)", "",
             "Computed from this one run: first t turns of every trajectory, best@n as the exact expectation "
             "over n-subsets of its trajectories.", "",
             "| n | t | n·t | correct best@n | correct avg | mean speedup best@n | fast_1 best@n |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['trajectories']} | {r['turns']} | {r['budget']} | {r['correct_best@k']:.3f} | "
              f"{r['correct_avg@k']:.3f} | {r['speedup_mean_best@k']:.3f} | {r['fast_1']:.3f} |" for r in rows]
    return "\n".join(lines) + "\n\n![scaling](scaling.png)"


def write_sweep(out_dir: str, records: Sequence[BenchRecord], trajectories: Sequence[int],
                turns: Sequence[int]) -> list[dict[str, Any]]:
    """DIR/sweep.json and DIR/scaling.png; returns the grid rows."""
    rows = scaling_grid(records, trajectories, turns)
    with open(os.path.join(out_dir, "sweep.json"), "w", encoding="utf-8") as f:
        json.dump({"trajectories": list(trajectories), "turns": list(turns), "method": "subsample one run",
                   "grid": rows}, f, indent=1)
    plot_scaling(rows, os.path.join(out_dir, "scaling.png"))
    return rows
