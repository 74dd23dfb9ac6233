"""Rewards: per-kernel score, per-turn discounted returns, task-grouped advantages (Kevin-32B's recipe)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kernelbench.harness.result import CORRECT, INCORRECT, REJECTED, STATUSES, EvalResult
from rewards import (
    ScoreConfig,
    advantages_by_task,
    discounted_returns,
    group_advantages,
    kernel_score,
)

# Kernel scores are >= 0; returns in general tests may be any sign.
SCORES = st.lists(st.floats(0.0, 50.0), min_size=1, max_size=8)
ANY_VALUES = st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=40)
GAMMAS = st.floats(0.0, 1.0)
MODES = st.sampled_from(["sum", "max"])


def result(status: str, speedup: float = 2.0, flags: tuple[str, ...] = ()) -> EvalResult:
    ok = status == CORRECT
    return EvalResult(status=status, compiled=ok or status == INCORRECT, correct=ok, speedup=speedup,
                      runtime_ms=1.0, ref_runtime_ms=speedup, flags=flags)


def spread(values: list[float]) -> float:
    return max(values) - min(values)


# ---------------------------------------------------------------- score


@pytest.mark.parametrize("status", STATUSES)
def test_score_of_each_status(status):
    if status == "harness_error":  # no verdict on the kernel: never scored, not a 0
        assert kernel_score(result(status, speedup=2.0)) is None
        return
    expected = 0.3 + 2.0 if status == CORRECT else 0.0
    assert kernel_score(result(status, speedup=2.0)) == pytest.approx(expected)


@pytest.mark.parametrize("status", [s for s in STATUSES if s not in (CORRECT, "harness_error")])
def test_only_correct_scores_even_with_a_stale_speedup(status):
    # A rejected kernel may well have been fast (that is why it cheated); it must still score 0.
    assert kernel_score(result(status, speedup=7.5, flags=("dynamic:torch_compute_op",))) == 0.0


def test_status_and_flag_must_both_say_correct():
    assert kernel_score(dataclasses.replace(result(CORRECT), correct=False)) == 0.0
    assert kernel_score(dataclasses.replace(result(INCORRECT), correct=True)) == 0.0


def test_slow_correct_kernel_still_beats_any_incorrect_one():
    assert kernel_score(result(CORRECT, speedup=0.5)) == pytest.approx(0.8)
    assert kernel_score(result(CORRECT, speedup=0.0)) == pytest.approx(0.3)
    assert kernel_score(result(INCORRECT, speedup=100.0)) == 0.0


def test_suspicious_speedup_scores_the_stored_reverified_speedup():
    flagged = result(CORRECT, speedup=14.0, flags=("suspicious_speedup",))
    assert kernel_score(flagged) == pytest.approx(14.3)
    assert ScoreConfig(speedup_cap=10.0).score(flagged) == pytest.approx(10.3)
    assert ScoreConfig(speedup_cap=10.0).score(result(CORRECT, speedup=3.0)) == pytest.approx(3.3)


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_correctness_weight(weight):
    assert kernel_score(result(CORRECT, speedup=1.5), correctness_weight=weight) == pytest.approx(weight + 1.5)
    assert ScoreConfig(correctness_weight=weight).score(result(CORRECT, speedup=1.5)) == pytest.approx(weight + 1.5)


def test_score_survives_json_round_trip():
    r = result(CORRECT, speedup=1.25, flags=("suspicious_speedup",))
    assert kernel_score(EvalResult.from_dict(r.to_dict())) == kernel_score(r) == pytest.approx(1.55)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_invalid_speedup_on_a_correct_result_is_a_fault(bad):
    with pytest.raises(ValueError):
        kernel_score(result(CORRECT, speedup=bad))
    assert kernel_score(result(REJECTED, speedup=bad)) == 0.0


def test_a_training_run_sets_its_score_from_its_config():
    from kernelbench.config_files import validate
    from train.config import TrainConfig
    from train.multiturn_rollout import scoring_of

    config = validate(TrainConfig, {"score": {"correctness_weight": 0.5, "speedup_cap": 2}}, "test")
    assert scoring_of(config).score(result(CORRECT, speedup=5.0)) == pytest.approx(2.5)
    assert scoring_of(TrainConfig()).score(result(CORRECT, speedup=5.0)) == pytest.approx(5.3)


def test_score_config_defaults_and_validation():
    cfg = ScoreConfig()
    assert (cfg.correctness_weight, cfg.speedup_cap) == (0.3, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.correctness_weight = 1.0  # type: ignore[misc]
    for bad in [dict(correctness_weight=-0.1), dict(correctness_weight=math.nan), dict(speedup_cap=0.0)]:
        with pytest.raises(ValueError):
            ScoreConfig(**bad)


@given(st.floats(0.0, 1e3), st.floats(0.0, 1e3), st.floats(0.0, 2.0))
def test_score_is_monotone_in_speedup(a, b, weight):
    lo, hi = sorted((a, b))
    s_lo = kernel_score(result(CORRECT, speedup=lo), weight)
    s_hi = kernel_score(result(CORRECT, speedup=hi), weight)
    assert weight <= s_lo <= s_hi


# ---------------------------------------------------------------- returns


def test_returns_hand_computed():
    # Turns: incorrect, correct at 0.5x, correct at 2.0x, incorrect.  γ = 0.4.
    scores = [0.0, 0.8, 2.3, 0.0]
    assert discounted_returns(scores) == pytest.approx([0.688, 1.72, 2.3, 0.0])
    # Max variant: R_1 = max(0.8, 0.4·2.3) = 0.92, R_0 = 0.4·0.92.
    assert discounted_returns(scores, mode="max") == pytest.approx([0.368, 0.92, 2.3, 0.0])
    assert discounted_returns(scores, gamma=0.8, mode="max") == pytest.approx([1.472, 1.84, 2.3, 0.0])


def test_returns_edge_cases():
    assert discounted_returns([]) == []
    assert discounted_returns([1.5]) == [1.5]
    assert discounted_returns([1.0, 2.0, 3.0], gamma=0.0) == [1.0, 2.0, 3.0]
    assert discounted_returns([1.0, 2.0, 3.0], gamma=1.0) == [6.0, 5.0, 3.0]
    assert discounted_returns([3.0, 1.0, 2.0], gamma=1.0, mode="max") == [3.0, 2.0, 2.0]
    for bad in [dict(gamma=-0.1), dict(gamma=1.5), dict(mode="mean")]:
        with pytest.raises(ValueError):
            discounted_returns([1.0], **bad)
    with pytest.raises(ValueError):
        discounted_returns([1.0, math.nan])


@given(SCORES, GAMMAS)
def test_sum_returns_satisfy_recurrence_and_closed_form(scores, gamma):
    r = discounted_returns(scores, gamma, "sum")
    n = len(scores)
    assert r[-1] == scores[-1]
    for t in range(n - 1):
        assert r[t] == pytest.approx(scores[t] + gamma * r[t + 1], rel=1e-12, abs=1e-12)
    for t in range(n):
        closed = math.fsum(gamma ** (i - t) * scores[i] for i in range(t, n))
        assert r[t] == pytest.approx(closed, rel=1e-9, abs=1e-9)


@given(SCORES, GAMMAS)
def test_max_returns_closed_form_and_bounds(scores, gamma):
    r_max = discounted_returns(scores, gamma, "max")
    r_sum = discounted_returns(scores, gamma, "sum")
    n = len(scores)
    for t in range(n):
        closed = max(gamma ** (i - t) * scores[i] for i in range(t, n))
        assert r_max[t] == pytest.approx(closed, rel=1e-9, abs=1e-12)
        # A turn earns at least its own score and at most the best score it led to, and (scores >= 0)
        # never more than the sum variant credits it.
        assert scores[t] <= r_max[t] <= max(scores[t:]) + 1e-12
        assert r_max[t] <= r_sum[t] + 1e-9


@given(SCORES, GAMMAS, st.floats(0.0, 10.0))
def test_constant_score_bonus_favours_earlier_turns_in_sum_mode(scores, gamma, c):
    # Returns are linear in scores: adding c to every turn's score adds c·Σ_{k<T−t} γ^k to R_t, so a
    # per-kernel bonus (such as the correctness weight) is worth more to turns with more turns after them.
    base = discounted_returns(scores, gamma)
    shifted = discounted_returns([s + c for s in scores], gamma)
    n = len(scores)
    for t in range(n):
        bonus = c * math.fsum(gamma ** k for k in range(n - t))
        assert shifted[t] - base[t] == pytest.approx(bonus, rel=1e-9, abs=1e-9)


# ---------------------------------------------------------------- advantages


def test_advantages_hand_computed():
    # mean 2, sample std 1 (population std would be sqrt(2/3)).
    assert group_advantages([1.0, 2.0, 3.0], eps=0.0) == pytest.approx([-1.0, 0.0, 1.0])
    assert group_advantages([1.0, 2.0, 3.0]) == pytest.approx([-1 / (1 + 1e-6), 0.0, 1 / (1 + 1e-6)], rel=1e-12)
    assert group_advantages([1.0, 2.0, 3.0], eps=0.0, ddof=0) == pytest.approx([-math.sqrt(1.5), 0.0, math.sqrt(1.5)])
    assert group_advantages([1.0, 2.0, 6.0], scale="none") == pytest.approx([-2.0, -1.0, 3.0])


def test_degenerate_groups_give_zeros():
    assert group_advantages([]) == []
    assert group_advantages([5.0]) == [0.0]
    assert group_advantages([0.0] * 64) == [0.0] * 64
    # 0.1 summed three times does not divide back to 0.1; zeros must not depend on that rounding.
    assert group_advantages([0.1, 0.1, 0.1], eps=0.0) == [0.0, 0.0, 0.0]
    assert group_advantages([0.1, 0.1, 0.1], scale="none") == [0.0, 0.0, 0.0]


def test_advantage_argument_validation():
    for bad in [dict(scale="batch"), dict(eps=-1.0), dict(ddof=-1)]:
        with pytest.raises(ValueError):
            group_advantages([1.0, 2.0], **bad)
    with pytest.raises(ValueError):
        group_advantages([1.0, math.inf])


@given(ANY_VALUES, st.sampled_from([0, 1]))
def test_advantages_have_zero_mean_and_unit_std(values, ddof):
    assume(spread(values) > 1e-3)
    adv = group_advantages(values, eps=0.0, ddof=ddof)
    n = len(adv)
    assert math.fsum(adv) == pytest.approx(0.0, abs=1e-9)
    assert math.fsum(a * a for a in adv) / (n - ddof) == pytest.approx(1.0, rel=1e-9)
    centred = group_advantages(values, scale="none")
    assert math.fsum(centred) == pytest.approx(0.0, abs=1e-9 * max(1.0, max(abs(v) for v in values)))


@given(ANY_VALUES, st.floats(-1e3, 1e3))
def test_advantages_invariant_to_shifting_every_return(values, c):
    assume(spread(values) > 1e-3)
    assert group_advantages([v + c for v in values], eps=0.0) == pytest.approx(
        group_advantages(values, eps=0.0), rel=1e-6, abs=1e-6)
    assert group_advantages([v + c for v in values], scale="none") == pytest.approx(
        group_advantages(values, scale="none"), abs=1e-9)


@given(st.lists(st.floats(0.0, 50.0), min_size=2, max_size=16), st.floats(0.0, 10.0), GAMMAS, MODES)
def test_advantages_invariant_to_adding_a_constant_to_every_score_of_single_turn_trajectories(scores, c, gamma, mode):
    # One turn per trajectory: each return is its score, so a score shift is a return shift. (With several
    # turns the shift depends on the turn; see test_constant_score_bonus_favours_earlier_turns_in_sum_mode.)
    assume(spread(scores) > 1e-3)

    def advantages(ss):
        return group_advantages([discounted_returns([s], gamma, mode)[0] for s in ss], eps=0.0)

    assert advantages([s + c for s in scores]) == pytest.approx(advantages(scores), rel=1e-6, abs=1e-6)


@given(ANY_VALUES, st.floats(1e-2, 1e2))
def test_advantages_invariant_to_positive_scaling(values, k):
    assume(spread(values) > 1e-3)
    assert group_advantages([k * v for v in values], eps=0.0) == pytest.approx(
        group_advantages(values, eps=0.0), rel=1e-6, abs=1e-6)
    assert group_advantages([-v for v in values], eps=0.0) == pytest.approx(
        [-a for a in group_advantages(values, eps=0.0)], abs=1e-9)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", 7]), st.floats(-100.0, 100.0)), max_size=60),
       st.randoms(use_true_random=False))
def test_advantages_by_task_keep_input_order(samples, rng):
    adv = advantages_by_task(samples)
    assert len(adv) == len(samples)
    for task in {t for t, _ in samples}:
        idx = [i for i, (t, _) in enumerate(samples) if t == task]
        expected = group_advantages([samples[i][1] for i in idx])
        assert [adv[i] for i in idx] == expected
        assert math.fsum(adv[i] for i in idx) == pytest.approx(0.0, abs=1e-6)
    # Shuffling the batch shuffles the advantages the same way.
    perm = list(range(len(samples)))
    rng.shuffle(perm)
    shuffled = advantages_by_task([samples[i] for i in perm])
    assert shuffled == pytest.approx([adv[i] for i in perm], rel=1e-12, abs=1e-12)


def test_pipeline_hand_computed():
    # Task "a": two trajectories of two turns; task "b": one trajectory whose kernels all fail.
    # Samples interleaved as a trainer might receive them.
    traj_a1 = [result(INCORRECT), result(CORRECT, speedup=1.0)]          # scores 0, 1.3
    traj_a2 = [result(CORRECT, speedup=0.5), result(REJECTED, 9.0)]      # scores 0.8, 0
    traj_b = [result(INCORRECT), result(REJECTED)]                       # scores 0, 0
    returns = {name: discounted_returns([kernel_score(r) for r in traj])
               for name, traj in [("a1", traj_a1), ("a2", traj_a2), ("b", traj_b)]}
    assert returns["a1"] == pytest.approx([0.52, 1.3])
    assert returns["a2"] == pytest.approx([0.8, 0.0])
    samples = [("a", returns["a1"][0]), ("b", returns["b"][0]), ("a", returns["a2"][0]),
               ("a", returns["a1"][1]), ("b", returns["b"][1]), ("a", returns["a2"][1])]
    adv = advantages_by_task(samples, eps=0.0)
    # Task a: returns 0.52, 0.8, 1.3, 0 -> mean 0.655, sample std sqrt(0.8853/3).
    std = math.sqrt(((0.52 - 0.655) ** 2 + (0.8 - 0.655) ** 2 + (1.3 - 0.655) ** 2 + 0.655 ** 2) / 3)
    assert adv == pytest.approx([(0.52 - 0.655) / std, 0.0, (0.8 - 0.655) / std,
                                 (1.3 - 0.655) / std, 0.0, -0.655 / std])


def test_a_result_record_is_read_strictly_and_carries_no_score_of_its_own():
    r = result(CORRECT, speedup=2.0)
    d = r.to_dict()
    assert "score" not in d and EvalResult.from_dict(d) == r
    assert EvalResult.from_dict({**d, "score": 99.0}) == r  # an older record's display score means nothing now
    with pytest.raises(ValueError, match="unknown field.*speedup_x"):
        EvalResult.from_dict({**d, "speedup_x": 3.0})
    with pytest.raises(ValueError, match=r"conditions: missing fields \[\], unknown fields \['gpu'\]"):
        EvalResult.from_dict({**d, "conditions": {**d["conditions"], "gpu": "x"}})
    with pytest.raises(ValueError, match=r"EvalResult: missing fields \['speedup'\]"):  # a field never defaults
        EvalResult.from_dict({k: v for k, v in d.items() if k != "speedup"})
    with pytest.raises(ValueError, match=r"EvalResult.speedup: expected float, got str"):
        EvalResult.from_dict({**d, "speedup": "2.0"})
    with pytest.raises(ValueError, match=r"EvalResult.conditions.timing_trials: expected int, got float"):
        EvalResult.from_dict({**d, "conditions": {**d["conditions"], "timing_trials": 2.5}})
    with pytest.raises(ValueError, match=r"limits_held"):
        EvalResult.from_dict({**d, "limits_held": ["memory", "wishful"]})
    with pytest.raises(ValueError, match="unknown status 'great'"):
        EvalResult.from_dict({**d, "status": "great"})
    older = {k: v for k, v in d.items() if k not in ("sol_fraction", "profile", "limits_held")}
    assert EvalResult.from_dict(older).sol_fraction == 0.0  # fields added later (ADDED_LATER) load with the value they meant
