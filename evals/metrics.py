"""Benchmark metrics over the kernels of a run: pure functions of its `results.jsonl` records (`BenchRecord`).

Definitions (DESIGN.md, "Metrics"; KernelBench arXiv 2502.10517; Kevin-32B arXiv 2507.11948):
- A trajectory is correct if any of its kernels is; its speedup is that of its fastest correct kernel, 0 if
  none (likewise against `torch.compile`, using `speedup_vs_compile`).
- `best@k`: per task, the best of k trajectories, averaged over tasks. A run holds n ≥ k trajectories per
  task, so best@k is the *expected* best over a uniformly random k-subset of them, computed exactly
  (`expected_best_of_k`); for correctness this is the unbiased pass@k estimator 1 - C(n-c,k)/C(n,k)
  (Chen et al. 2021), and for k = n it is the plain maximum.
- `avg@k`: the mean over all trajectories of a task, averaged over tasks.
- `fast_p`: share of tasks whose (best) trajectory is correct with speedup STRICTLY greater than p
  (KernelBench's `fastp`: `is_correct & (speedup > p)`); `fast_0` is therefore the share correct with a
  timed, positive speedup.
- Mean speedup counts a task without a correct kernel as 0 (it is what the agent delivered). The geometric
  mean cannot take zeros: it is taken over the tasks (or trajectories) that have a correct kernel only, and
  is 0.0 when none has; `correct_*` beside it says how many that is.
- A `harness_error` record is no verdict on its kernel: it is left out of every figure (never a 0) and
  counted apart (`harness_errors`, `status_counts`).
- `sol_fraction_mean`: the mean speed-of-light fraction (roofline time / measured time, `EvalResult.sol_fraction`)
  of the kernel each correct trajectory delivered (its fastest correct one), over the trajectories whose kernel
  has one (timed, a roofline known for the device; `sol_fraction_trajectories` says how many); 0.0 when none.
  Trajectories with no correct kernel are left out rather than counted as 0: a fraction of nothing means nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from evals.results_log import BenchRecord
from kernelbench.harness.result import CORRECT, HARNESS_ERROR

FAST_P_THRESHOLDS = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
"""The p of fast_p reported (KernelBench reports fast_0, fast_1, fast_2; Kevin-32B adds the others)."""


@dataclass(frozen=True)
class TrajectoryOutcome:
    """What one trajectory delivered, up to some turn."""

    correct: bool
    speedup: float
    """Eager speedup of its fastest correct kernel, 0 if none."""
    speedup_vs_compile: float
    """`torch.compile` speedup of its correct kernel with the largest such speedup, 0 if none or not measured."""
    sol_fraction: float = 0.0
    """Speed-of-light fraction of its fastest correct kernel, 0 if none or not measured."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: probability that a random k-subset of n samples, c of them correct, holds one."""
    if n <= 0 or k <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def expected_best_of_k(values: Sequence[float], k: int) -> float:
    """E[max of a uniformly random k-subset of `values`], exactly.

    With values sorted ascending v_1..v_n, v_i is the maximum of C(i-1, k-1) of the C(n, k) subsets.
    On 0/1 values this equals `pass_at_k`.
    """
    n = len(values)
    if n == 0 or k <= 0:
        return 0.0
    k = min(k, n)
    ordered = sorted(values)
    total = math.comb(n, k)
    return sum(v * math.comb(i, k - 1) for i, v in enumerate(ordered) if i >= k - 1) / total


def fast_p(correct: Sequence[bool], speedups: Sequence[float], p: float) -> float:
    """Share of items that are correct with speedup strictly greater than p."""
    if not correct:
        return 0.0
    return sum(1 for c, s in zip(correct, speedups) if c and s > p) / len(correct)


def geomean(values: Iterable[float]) -> float:
    """Geometric mean of the positive values (zeros, i.e. no correct kernel, are left out); 0.0 if none."""
    logs = [math.log(v) for v in values if v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def p_key(p: float) -> str:
    """`fast_1`, `fast_0.5`: the key a threshold is reported under."""
    return f"fast_{p:g}"


@dataclass(frozen=True)
class KernelPoint:
    """What one judged kernel counts for in the metrics."""

    correct: bool
    """Judged `correct` by the harness."""
    speedup: float
    """Its eager speedup; 0 unless correct."""
    speedup_vs_compile: float
    """Its `torch.compile` speedup; 0 unless correct and measured."""
    sol_fraction: float
    """Its speed-of-light fraction; 0 when not measured (and in records older than the field)."""


def record_point(rec: BenchRecord) -> KernelPoint:
    """The point one results.jsonl record counts for."""
    res = rec.result
    if not (res.status == CORRECT and res.correct):
        return KernelPoint(False, 0.0, 0.0, res.sol_fraction)
    return KernelPoint(True, res.speedup, res.speedup_vs_compile, res.sol_fraction)


def trajectory_outcomes(records: Iterable[BenchRecord], max_turns: int | None = None,
                        max_trajectories: int | None = None) -> dict[str, list[TrajectoryOutcome]]:
    """Per task, one outcome per trajectory, over turns `< max_turns` and the first `max_trajectories`
    trajectories (in their order of first appearance, which is the run's trajectory order)."""
    kernels: dict[str, dict[str, list[KernelPoint]]] = defaultdict(dict)
    for rec in records:
        if max_turns is not None and rec.turn >= max_turns:
            continue
        if is_harness_error(rec):  # not a verdict on the kernel: left out, never counted as a failure
            continue
        kernels[rec.task].setdefault(rec.trajectory, []).append(record_point(rec))
    out: dict[str, list[TrajectoryOutcome]] = {}
    for task, trajs in kernels.items():
        ids = _trajectory_order(trajs)[:max_trajectories]
        outcomes = []
        for tid in ids:
            points = trajs[tid]
            good = [p for p in points if p.correct]
            outcomes.append(TrajectoryOutcome(correct=bool(good), speedup=max((p.speedup for p in good), default=0.0),
                                              speedup_vs_compile=max((p.speedup_vs_compile for p in good), default=0.0),
                                              sol_fraction=max(good, key=lambda p: p.speedup).sol_fraction if good else 0.0))
        out[task] = outcomes
    return out


def is_harness_error(rec: BenchRecord) -> bool:
    """The record's evaluation failed for the harness's fault: excluded from every metric, shown in counts."""
    return rec.result.status == HARNESS_ERROR


def _trajectory_order(trajs: dict[str, Any]) -> list[str]:
    """Numeric ids in numeric order (`2` before `10`), others after in insertion order."""
    numeric = sorted((t for t in trajs if t.isdigit()), key=int)
    return numeric + [t for t in trajs if not t.isdigit()]


def summarize(outcomes: dict[str, list[TrajectoryOutcome]], k: int | None = None) -> dict[str, Any]:
    """Headline metrics over tasks; `k` defaults to the most trajectories any task has."""
    tasks = [o for o in outcomes.values() if o]
    if not tasks:
        return {"tasks": 0, "k": 0}
    k = k or max(len(o) for o in tasks)
    best_correct = [expected_best_of_k([float(t.correct) for t in o], k) for o in tasks]
    best_speed = [expected_best_of_k([t.speedup for t in o], k) for o in tasks]
    best_comp = [expected_best_of_k([t.speedup_vs_compile for t in o], k) for o in tasks]
    avg_speed = [_mean([t.speedup for t in o]) for o in tasks]
    # fast_p of the best trajectory is likewise an expectation over k-subsets of an indicator.
    fast_best = {base: {p_key(p): _mean([expected_best_of_k([float(t.correct and getattr(t, attr) > p) for t in o], k)
                                         for o in tasks]) for p in FAST_P_THRESHOLDS}
                 for base, attr in (("eager", "speedup"), ("compile", "speedup_vs_compile"))}
    flat = [t for o in tasks for t in o]
    fast_avg = {base: {p_key(p): _mean([fast_p([t.correct for t in o], [getattr(t, attr) for t in o], p) for o in tasks])
                       for p in FAST_P_THRESHOLDS}
                for base, attr in (("eager", "speedup"), ("compile", "speedup_vs_compile"))}
    solved = [max(t.speedup for t in o) for o in tasks if any(t.correct for t in o)]
    correct_flat = [t for t in flat if t.correct]
    return {
        "tasks": len(tasks),
        "k": k,
        "trajectories": len(flat),
        "correct_best@k": _mean(best_correct),
        "correct_avg@k": _mean([_mean([float(t.correct) for t in o]) for o in tasks]),
        "speedup_mean_best@k": _mean(best_speed),
        "speedup_mean_avg@k": _mean(avg_speed),
        "speedup_geomean_best": geomean(solved),
        "speedup_geomean_avg": geomean(t.speedup for t in correct_flat),
        "tasks_solved": len(solved),
        "correct_trajectories": len(correct_flat),
        "compile_speedup_mean_best@k": _mean(best_comp),
        "compile_baseline_coverage": (sum(1 for t in correct_flat if t.speedup_vs_compile > 0) / len(correct_flat)
                                      if correct_flat else 0.0),
        "fast_p": fast_best,
        "fast_p_avg": fast_avg,
        **sol_summary(flat),
    }


def sol_summary(trajectories: Sequence[TrajectoryOutcome]) -> dict[str, float | int]:
    """Mean speed-of-light fraction of the correct trajectories' kernels that have one (module docstring)."""
    sols = [t.sol_fraction for t in trajectories if t.correct and t.sol_fraction > 0]
    return {"sol_fraction_mean": _mean(sols), "sol_fraction_trajectories": len(sols)}


def pass_at_ks(outcomes: dict[str, list[TrajectoryOutcome]]) -> dict[str, float]:
    """pass@k for k = 1, 2, 4, ... up to the fewest trajectories any task has, averaged over tasks."""
    tasks = [o for o in outcomes.values() if o]
    if not tasks:
        return {}
    n_min = min(len(o) for o in tasks)
    ks = sorted({2 ** i for i in range(n_min.bit_length()) if 2 ** i <= n_min} | {n_min})
    return {str(k): _mean([pass_at_k(len(o), sum(t.correct for t in o), k) for o in tasks]) for k in ks}


def per_turn_curve(records: Sequence[BenchRecord], turns: int) -> list[dict[str, Any]]:
    """Best-so-far metrics after each turn t = 1..turns (only the first t turns of every trajectory count)."""
    curve = []
    for t in range(1, turns + 1):
        s = summarize(trajectory_outcomes(records, max_turns=t))
        curve.append({"turn": t, **{key: s.get(key, 0.0) for key in (
            "correct_best@k", "correct_avg@k", "speedup_mean_best@k", "speedup_mean_avg@k", "speedup_geomean_best")},
            "fast_1": s.get("fast_p", {}).get("eager", {}).get("fast_1", 0.0)})
    return curve


def status_counts(records: Iterable[BenchRecord]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for rec in records:
        counts[rec.result.status] += 1
    return dict(sorted(counts.items()))


def compute_metrics(records: Sequence[BenchRecord], turns: int | None = None, *, price_in: float = 0.0,
                    price_out: float = 0.0) -> dict[str, Any]:
    """Everything metrics.json holds: overall, by level, pass@k, per-turn best-so-far, status counts, tokens
    and (with prices in USD per million tokens) cost."""
    turns = turns or (max((r.turn for r in records), default=-1) + 1)
    outcomes = trajectory_outcomes(records)
    levels: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        levels[str(rec.level)].add(rec.task)
    by_level = {lvl: summarize({t: outcomes[t] for t in sorted(ids)}) for lvl, ids in sorted(levels.items())}
    return {"kernels": sum(not is_harness_error(r) for r in records),
            "harness_errors": sum(is_harness_error(r) for r in records), "turns": turns, "overall": summarize(outcomes), "by_level": by_level,
            "pass@k": pass_at_ks(outcomes), "per_turn": per_turn_curve(records, turns),
            "status_counts": status_counts(records), "thresholds": list(FAST_P_THRESHOLDS),
            "tokens": token_metrics(records, price_in, price_out)}


def token_metrics(records: Sequence[BenchRecord], price_in: float = 0.0, price_out: float = 0.0) -> dict[str, Any]:
    """Tokens the policy spent, in all and per kernel, per correct kernel and per fast kernel (correct and
    speedup > 1), and with prices (USD per million prompt / completion tokens) what that cost.

    Per correct (fast) kernel divides the whole run's spend, failed attempts included, by the number of
    correct (fast) kernels: what one such kernel cost to get. None when the run has none (no division by 0).
    Completion tokens include reasoning tokens, as APIs bill them; a record without counts (a replay, a backend
    that cannot count) adds 0."""
    prompt = sum(r.prompt_tokens for r in records)
    completion = sum(r.completion_tokens for r in records)
    reasoning = sum(r.reasoning_tokens for r in records)
    points = [record_point(r) for r in records]
    counts = {"kernel": len(records), "correct_kernel": sum(1 for p in points if p.correct),
              "fast_kernel": sum(1 for p in points if p.correct and p.speedup > 1.0)}
    total = prompt + completion
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "reasoning_tokens": reasoning,
                           "total_tokens": total, "correct_kernels": counts["correct_kernel"],
                           "fast_kernels": counts["fast_kernel"], "counted": bool(total),
                           "price_in_usd_per_mtok": price_in, "price_out_usd_per_mtok": price_out}
    cost = (prompt * price_in + completion * price_out) / 1e6 if (price_in or price_out) else None
    out["cost_usd"] = cost
    for name, n in counts.items():
        out[f"tokens_per_{name}"] = total / n if n else None
        out[f"completion_tokens_per_{name}"] = completion / n if n else None
        out[f"cost_per_{name}_usd"] = cost / n if cost is not None and n else None
    return out
