"""DIR/report.md and its PNG plots (matplotlib, Agg backend: no display needed).

Plots: `speedup_distribution.png` (per-trajectory speedups of correct trajectories, eager and
torch.compile), `fast_p.png` (fast_p as a function of p, best@k and avg@k), `best_so_far.png`
(correctness and mean speedup after each turn), `speedup_vs_sol.png` (each correct trajectory's speedup
against its kernel's speed-of-light fraction, by level) and, for sweeps, `scaling.png` (evals.sweep).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from evals.metrics import FAST_P_THRESHOLDS, fast_p, p_key, summarize, trajectory_outcomes
from evals.results_log import BenchRecord

# Imports inside functions: matplotlib (0.4 s to import) loads when a figure is drawn, not when this module is
# imported for its records and helpers.


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_speedups(records: Sequence[BenchRecord], path: str) -> None:
    plt = _plt()
    outcomes = [t for o in trajectory_outcomes(records).values() for t in o if t.correct]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    eager = [t.speedup for t in outcomes]
    comp = [t.speedup_vs_compile for t in outcomes if t.speedup_vs_compile > 0]
    if eager:
        ax.hist(eager, bins=20, alpha=0.7, label=f"vs eager ({len(eager)})")
    if comp:
        ax.hist(comp, bins=20, alpha=0.7, label=f"vs torch.compile ({len(comp)})")
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xlabel("speedup of the trajectory's fastest correct kernel")
    ax.set_ylabel("trajectories")
    ax.set_title("Speedup distribution (correct trajectories)")
    if eager or comp:
        ax.legend()
    _save(fig, path)


def plot_fast_p(records: Sequence[BenchRecord], path: str) -> None:
    """fast_p over a continuous p, for the best trajectory per task and averaged over trajectories."""
    plt = _plt()
    outcomes = trajectory_outcomes(records)
    tasks = [o for o in outcomes.values() if o]
    top = max([2.5] + [t.speedup * 1.1 for o in tasks for t in o])
    ps = [top * i / 200 for i in range(201)]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for attr, label in (("speedup", "eager"), ("speedup_vs_compile", "torch.compile")):
        best_c = [any(t.correct for t in o) for o in tasks]
        best_s = [max(getattr(t, attr) for t in o) for o in tasks]
        if label == "torch.compile" and not any(best_s):
            continue
        ax.plot(ps, [fast_p(best_c, best_s, p) for p in ps], label=f"best@k vs {label}")
        avg = [sum(fast_p([t.correct for t in o], [getattr(t, attr) for t in o], p) for o in tasks) / max(1, len(tasks))
               for p in ps]
        ax.plot(ps, avg, ls="--", label=f"avg@k vs {label}")
    ax.axvline(1.0, color="k", lw=0.8, ls=":")
    ax.set_xlabel("p (speedup threshold)")
    ax.set_ylabel("fast_p (share of tasks)")
    ax.set_ylim(0, 1.05)
    ax.set_title("fast_p: correct and faster than p x reference")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_best_so_far(metrics: dict[str, Any], path: str) -> None:
    plt = _plt()
    curve = metrics.get("per_turn", [])
    turns = [c["turn"] for c in curve]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.plot(turns, [c["correct_best@k"] for c in curve], marker="o", label="best@k")
    a.plot(turns, [c["correct_avg@k"] for c in curve], marker="o", label="avg@k")
    a.set_xlabel("turns")
    a.set_ylabel("correct (share of tasks)")
    a.set_ylim(0, 1.05)
    a.legend()
    b.plot(turns, [c["speedup_mean_best@k"] for c in curve], marker="o", label="mean best@k")
    b.plot(turns, [c["speedup_mean_avg@k"] for c in curve], marker="o", label="mean avg@k")
    b.set_xlabel("turns")
    b.set_ylabel("speedup vs eager")
    b.legend()
    fig.suptitle("Best so far after each turn")
    _save(fig, path)


def plot_speedup_vs_sol(records: Sequence[BenchRecord], path: str) -> None:
    """One point per correct trajectory whose kernel has a speed-of-light fraction: x the fraction of the
    device's roofline it reached, y its speedup over eager PyTorch (log), coloured by level. Far right and low
    is a kernel near the hardware's limit whose reference was already fast; far left, room left."""
    plt = _plt()
    level = {rec.task: str(rec.level) for rec in records}
    points: dict[str, list[tuple[float, float]]] = {}
    for task, outs in trajectory_outcomes(records).items():
        for t in outs:
            if t.correct and t.sol_fraction > 0 and t.speedup > 0:
                points.setdefault(level.get(task, "0"), []).append((t.sol_fraction, t.speedup))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for lvl, pts in sorted(points.items()):
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.7, label=f"level {lvl} ({len(pts)})")
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("fraction of the roofline (speed of light)")
    ax.set_ylabel("speedup vs eager")
    ax.set_title("Speedup against speed of light (correct trajectories)")
    if points:
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no correct kernel was timed against a roofline", ha="center", va="center",
                transform=ax.transAxes)
    _save(fig, path)


def sol_lines(metrics: dict[str, Any]) -> list[str]:
    """The speed-of-light section: mean fraction of the roofline per level, and the plot."""
    rows = [(lvl, str(v.get("sol_fraction_trajectories", 0)), _f(v.get("sol_fraction_mean", 0.0)))
            for lvl, v in [("all", metrics.get("overall", {})), *metrics.get("by_level", {}).items()]]
    return (["## Speed of light", "", "Mean fraction of the device's roofline time (bytes / bandwidth or FLOPs / "
             "peak, whichever is longer) that each correct trajectory's kernel reached; 1 is the hardware's limit. "
             "See docs/metrics.md.", ""]
            + _table(("level", "correct trajectories with a roofline", "mean sol_fraction"), rows)
            + ["", "![speedup vs speed of light](speedup_vs_sol.png)"])


def _save(fig, path: str) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)


def _f(x: float) -> str:
    return f"{x:.3f}"


def headline_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    k = s.get("k", 0)
    return [("tasks", str(s.get("tasks", 0))), ("trajectories per task (k)", str(k)),
            (f"correct best@{k}", _f(s.get("correct_best@k", 0))), (f"correct avg@{k}", _f(s.get("correct_avg@k", 0))),
            (f"mean speedup best@{k}", _f(s.get("speedup_mean_best@k", 0))),
            (f"mean speedup avg@{k}", _f(s.get("speedup_mean_avg@k", 0))),
            (f"geomean speedup best (over {s.get('tasks_solved', 0)} solved tasks)", _f(s.get("speedup_geomean_best", 0))),
            (f"geomean speedup avg (over {s.get('correct_trajectories', 0)} correct trajectories)",
             _f(s.get("speedup_geomean_avg", 0))),
            (f"mean speedup vs torch.compile best@{k}", _f(s.get("compile_speedup_mean_best@k", 0))),
            ("correct kernels with a torch.compile baseline", _f(s.get("compile_baseline_coverage", 0)))]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def conditions_of(records: Sequence[BenchRecord]) -> dict[str, list[str]]:
    """Distinct measurement conditions across the run's kernels (device name, torch, sandbox, size...)."""
    seen: dict[str, set[str]] = {k: set() for k in ("device", "device_name", "driver_version", "torch_version",
                                                    "cuda_version", "sandbox", "op_policy", "size", "cpu_threads")}
    for rec in records:
        cond = rec.result.conditions
        if not cond.device_name:
            continue  # never reached the run stage (format, static or compile error): measured nothing
        for k in seen:
            seen[k].add(str(getattr(cond, k)))
    return {k: sorted(v) for k, v in seen.items() if v}


def write_report(out_dir: str, metrics: dict[str, Any], records: Sequence[BenchRecord],
                 config: dict[str, Any] | None = None, extra_sections: Sequence[str] = ()) -> str:
    """Write report.md and its plots into `out_dir`; returns the report's path."""
    plot_speedups(records, os.path.join(out_dir, "speedup_distribution.png"))
    plot_fast_p(records, os.path.join(out_dir, "fast_p.png"))
    plot_best_so_far(metrics, os.path.join(out_dir, "best_so_far.png"))
    plot_speedup_vs_sol(records, os.path.join(out_dir, "speedup_vs_sol.png"))
    cfg = config or {}
    s = metrics.get("overall", {})
    lines = [f"# Benchmark: {cfg.get('model') or cfg.get('backend', '')} on {cfg.get('tasks', '')}", "",
             f"{metrics.get('kernels', 0)} kernels ({metrics.get('expected_kernels', '?')} planned): "
             f"{s.get('tasks', 0)} tasks x {s.get('k', 0)} trajectories x {metrics.get('turns', 0)} turns, "
             f"backend `{cfg.get('backend', '')}`, device `{cfg.get('device', '')}`.", "",
             "A trajectory is correct if any of its kernels is; its speedup is that of its fastest correct kernel "
             "(0 if none). best@k is the expected best of k trajectories, avg@k their mean; fast_p counts tasks "
             "correct with speedup strictly above p. See docs/bench.md.", "", "## Headline", ""]
    lines += _table(("metric", "value"), headline_rows(s))
    lines += ["", "## fast_p", ""]
    rows = []
    for base in ("eager", "compile"):
        for kind in ("fast_p", "fast_p_avg"):
            vals = s.get(kind, {}).get(base, {})
            rows.append([f"{'best@k' if kind == 'fast_p' else 'avg@k'} vs {base}"] +
                        [_f(vals.get(p_key(p), 0.0)) for p in FAST_P_THRESHOLDS])
    lines += _table(["", *[p_key(p) for p in FAST_P_THRESHOLDS]], rows)
    if not s.get("compile_baseline_coverage"):
        lines += ["", "No torch.compile baseline was measured for this run: the `compile` rows are 0."]
    lines += ["", "![fast_p](fast_p.png)", "", "![speedups](speedup_distribution.png)", "", "## By level", ""]
    lines += _table(("level", "tasks", "correct best@k", "correct avg@k", "mean speedup best@k", "fast_1"),
                    [(lvl, str(v.get("tasks", 0)), _f(v.get("correct_best@k", 0)), _f(v.get("correct_avg@k", 0)),
                      _f(v.get("speedup_mean_best@k", 0)), _f(v.get("fast_p", {}).get("eager", {}).get("fast_1", 0)))
                     for lvl, v in metrics.get("by_level", {}).items()])
    lines += [""] + sol_lines(metrics)
    lines += ["", "## pass@k (unbiased estimator)", ""]
    lines += _table(("k", "pass@k"), [(k, _f(v)) for k, v in metrics.get("pass@k", {}).items()])
    lines += ["", "## Best so far by turn", ""]
    lines += _table(("turns", "correct best@k", "correct avg@k", "mean speedup best@k", "fast_1"),
                    [(str(c["turn"]), _f(c["correct_best@k"]), _f(c["correct_avg@k"]), _f(c["speedup_mean_best@k"]),
                      _f(c["fast_1"])) for c in metrics.get("per_turn", [])])
    lines += ["", "![best so far](best_so_far.png)", "", "## Per task", ""]
    lines += _table(("task", "correct trajectories", "best speedup", "best vs torch.compile"), _task_rows(records))
    lines += ["", "## Tokens and cost", ""] + token_lines(metrics.get("tokens", {}))
    lines += ["", "## Statuses", ""]
    lines += _table(("status", "kernels"), [(k, str(v)) for k, v in metrics.get("status_counts", {}).items()])
    lines += ["", "## Conditions", ""]
    lines += _table(("field", "values"), [(k, ", ".join(v)) for k, v in conditions_of(records).items()])
    for section in extra_sections:
        lines += ["", section]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def token_lines(t: dict[str, Any]) -> list[str]:
    """The tokens section: totals, and per kernel / correct kernel / fast kernel (speedup > 1), with cost."""
    if not t.get("counted"):
        return ["The backend reported no token counts for these kernels (a replay generates none)."]
    lines = [f"{t['prompt_tokens']:,} prompt and {t['completion_tokens']:,} completion tokens "
             f"({t['reasoning_tokens']:,} of them reasoning)"
             + (f"; cost ${t['cost_usd']:.4f} at ${t['price_in_usd_per_mtok']:g} / ${t['price_out_usd_per_mtok']:g} "
                "per million prompt / completion tokens." if t.get("cost_usd") is not None else "."), ""]
    has_cost = t.get("cost_usd") is not None

    def cell(v: Any, money: bool = False) -> str:
        return "-" if v is None else (f"${v:.4f}" if money else f"{v:,.0f}")

    rows = []
    for name, label in (("kernel", "kernel"), ("correct_kernel", "correct kernel"), ("fast_kernel", "fast kernel (>1x)")):
        row = [label, cell(t.get(f"tokens_per_{name}")), cell(t.get(f"completion_tokens_per_{name}"))]
        rows.append(row + ([cell(t.get(f"cost_per_{name}_usd"), money=True)] if has_cost else []))
    header = ["per", "tokens", "completion tokens"] + (["cost"] if has_cost else [])
    return lines + _table(header, rows)


def _task_rows(records: Sequence[BenchRecord]) -> list[tuple[str, ...]]:
    rows = []
    for task, outs in sorted(trajectory_outcomes(records).items()):
        rows.append((task, f"{sum(t.correct for t in outs)}/{len(outs)}",
                     _f(max((t.speedup for t in outs), default=0.0)),
                     _f(max((t.speedup_vs_compile for t in outs), default=0.0))))
    return rows


def summary_line(metrics: dict[str, Any]) -> str:
    s = metrics.get("overall", summarize({}))
    return (f"{s.get('tasks', 0)} tasks: correct best@{s.get('k', 0)} {s.get('correct_best@k', 0):.3f}, "
            f"avg {s.get('correct_avg@k', 0):.3f}; mean speedup best {s.get('speedup_mean_best@k', 0):.3f}; "
            f"fast_1 {s.get('fast_p', {}).get('eager', {}).get('fast_1', 0):.3f}")
