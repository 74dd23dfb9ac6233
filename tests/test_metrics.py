"""evals.metrics against values computed by hand (KernelBench's fast_p, the unbiased pass@k, best@k / avg@k)."""

from __future__ import annotations

import math

import pytest

from evals import metrics as m
from kernelbench.harness.result import EvalResult
from tests.bench_records import bench_record


def rec(task, level, traj, turn, status, speedup=0.0, vs_compile=0.0):
    correct = status == "correct"
    return bench_record(task, traj, turn, EvalResult(status=status, correct=correct, speedup=speedup if correct else 0.0,
                                                     speedup_vs_compile=vs_compile if correct else 0.0), level=level)


# Task A (level 1): traj 0 = [incorrect, correct 2.0x (1.5x vs compile)], traj 1 = [correct 0.5x, correct 1.2x]
# Task B (level 2): traj 0 = [format_error, compile_error],               traj 1 = [correct 1.0x, incorrect]
RUN = [
    rec("A", 1, 0, 0, "incorrect"), rec("A", 1, 0, 1, "correct", 2.0, 1.5),
    rec("A", 1, 1, 0, "correct", 0.5), rec("A", 1, 1, 1, "correct", 1.2),
    rec("B", 2, 0, 0, "format_error"), rec("B", 2, 0, 1, "compile_error"),
    rec("B", 2, 1, 0, "correct", 1.0), rec("B", 2, 1, 1, "incorrect"),
]


def test_pass_at_k_unbiased_estimator():
    assert m.pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)   # 1 - C(3,2)/C(5,2)
    assert m.pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert m.pass_at_k(3, 0, 3) == 0.0
    assert m.pass_at_k(3, 2, 2) == 1.0                           # n - c < k: every 2-subset holds a correct one
    assert m.pass_at_k(10, 3, 1) == pytest.approx(0.3)           # pass@1 is the plain success rate


def test_expected_best_of_k_is_the_mean_max_over_subsets():
    assert m.expected_best_of_k([1.0, 2.0, 3.0], 2) == pytest.approx(8 / 3)  # max of {1,2},{1,3},{2,3}
    assert m.expected_best_of_k([3.0, 1.0, 2.0], 1) == pytest.approx(2.0)
    assert m.expected_best_of_k([1.0, 2.0, 3.0], 3) == 3.0
    assert m.expected_best_of_k([1.0, 2.0], 5) == 2.0
    flags = [1.0, 0.0, 0.0, 1.0, 0.0]
    for k in range(1, 6):
        assert m.expected_best_of_k(flags, k) == pytest.approx(m.pass_at_k(5, 2, k))


def test_fast_p_is_strict():
    correct, speed = [True, True, False, True], [1.0, 1.5, 3.0, 2.0]
    assert m.fast_p(correct, speed, 1.0) == pytest.approx(2 / 4)   # 1.0 is not > 1; the incorrect 3.0 never counts
    assert m.fast_p(correct, speed, 1.5) == pytest.approx(1 / 4)
    assert m.fast_p(correct, speed, 2.0) == 0.0
    assert m.fast_p(correct, speed, 0.0) == pytest.approx(3 / 4)


def test_geomean_leaves_out_zeros():
    assert m.geomean([2.0, 8.0, 0.0]) == pytest.approx(4.0)
    assert m.geomean([0.0, 0.0]) == 0.0
    assert m.geomean([]) == 0.0


def test_trajectory_is_correct_if_any_kernel_is_and_takes_its_fastest_correct_speedup():
    out = m.trajectory_outcomes(RUN)
    assert out["A"] == [m.TrajectoryOutcome(True, 2.0, 1.5), m.TrajectoryOutcome(True, 1.2, 0.0)]
    assert out["B"] == [m.TrajectoryOutcome(False, 0.0, 0.0), m.TrajectoryOutcome(True, 1.0, 0.0)]


def test_best_at_k_vs_avg_at_k():
    s = m.summarize(m.trajectory_outcomes(RUN))
    assert s["k"] == 2 and s["tasks"] == 2
    assert s["correct_best@k"] == pytest.approx(1.0)
    assert s["correct_avg@k"] == pytest.approx((1.0 + 0.5) / 2)
    assert s["speedup_mean_best@k"] == pytest.approx((2.0 + 1.0) / 2)
    assert s["speedup_mean_avg@k"] == pytest.approx(((2.0 + 1.2) / 2 + (0.0 + 1.0) / 2) / 2)
    assert s["speedup_geomean_best"] == pytest.approx(math.sqrt(2.0 * 1.0))
    assert s["speedup_geomean_avg"] == pytest.approx((2.0 * 1.2 * 1.0) ** (1 / 3))
    fe = s["fast_p"]["eager"]
    assert set(fe) == {"fast_0", "fast_0.5", "fast_0.8", "fast_1", "fast_1.5", "fast_2"}
    assert (fe["fast_0"], fe["fast_1"], fe["fast_1.5"], fe["fast_2"]) == pytest.approx((1.0, 0.5, 0.5, 0.0))
    fa = s["fast_p_avg"]["eager"]
    assert fa["fast_1"] == pytest.approx((1.0 + 0.0) / 2)
    assert fa["fast_0.5"] == pytest.approx((1.0 + 0.5) / 2)   # A's 0.5x turn is superseded by 1.2x in its trajectory
    assert s["fast_p"]["compile"]["fast_1"] == pytest.approx(0.5)
    assert s["compile_baseline_coverage"] == pytest.approx(1 / 3)
    one = m.summarize(m.trajectory_outcomes(RUN), k=1)        # best@1 is the mean
    assert one["correct_best@k"] == pytest.approx(s["correct_avg@k"])
    assert one["speedup_mean_best@k"] == pytest.approx(s["speedup_mean_avg@k"])


def test_pass_at_ks_and_levels_and_turn_curve():
    full = m.compute_metrics(RUN)
    assert full["pass@k"] == pytest.approx({"1": 0.75, "2": 1.0})
    assert full["by_level"]["1"]["speedup_mean_best@k"] == pytest.approx(2.0)
    assert full["by_level"]["2"]["correct_avg@k"] == pytest.approx(0.5)
    first, second = full["per_turn"]
    assert first["turn"] == 1
    assert first["correct_best@k"] == pytest.approx(1.0)
    assert first["correct_avg@k"] == pytest.approx(0.5)
    assert first["speedup_mean_best@k"] == pytest.approx((0.5 + 1.0) / 2)
    assert first["fast_1"] == 0.0                                # B's 1.0x is not strictly faster
    assert second["speedup_mean_best@k"] == pytest.approx(full["overall"]["speedup_mean_best@k"])
    assert full["status_counts"] == {"compile_error": 1, "correct": 4, "format_error": 1, "incorrect": 2}


def test_max_trajectories_keeps_numeric_order():
    recs = [rec("A", 1, 10, 0, "correct", 3.0), rec("A", 1, 2, 0, "incorrect"), rec("A", 1, 1, 0, "correct", 1.5)]
    out = m.trajectory_outcomes(recs, max_trajectories=2)
    assert [t.speedup for t in out["A"]] == [1.5, 0.0]


def test_sweep_grid_subsamples_one_run():
    from evals.sweep import parse_grid, scaling_grid

    rows = {(r["trajectories"], r["turns"]): r for r in scaling_grid(RUN, [1, 2], [1, 2])}
    assert rows[(2, 2)]["speedup_mean_best@k"] == pytest.approx(1.5)
    assert rows[(1, 2)]["speedup_mean_best@k"] == pytest.approx(1.05)
    assert rows[(2, 1)]["correct_best@k"] == pytest.approx(1.0)
    assert rows[(1, 1)]["correct_best@k"] == pytest.approx(0.5)
    assert parse_grid("4,1,2,2") == [1, 2, 4]
    with pytest.raises(ValueError):
        parse_grid("0,1")
