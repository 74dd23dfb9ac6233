"""Per-kernel score: what one evaluated candidate is worth to the learner.

Kevin-32B (arXiv 2507.11948, section on reward design): `S = 0.3·correct + speedup·correct`, with speedup the
eager-PyTorch reference time over the kernel time. A correctness weight of 1.0 or 0 both plateaued, and rewards
for intermediate steps (it compiled, it ran) were over-optimised, so nothing short of a correct kernel scores.
"""

from __future__ import annotations

import math

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from kernelbench.harness.result import CORRECT, HARNESS_ERROR, EvalResult


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class ScoreConfig:
    """How an `EvalResult` becomes a scalar score: the `score` section of `train` and `bench`. Validated on
    construction (a negative or non-finite weight, a cap <= 0: ValueError naming the field)."""

    correctness_weight: float = Field(0.3, ge=0, allow_inf_nan=False)
    """Bonus for any correct kernel, added to its speedup (Kevin-32B's 0.3; 1.0 and 0 both plateaued there)."""
    speedup_cap: float | None = Field(None, gt=0)
    """Largest speedup that counts; None for no cap. Kevin-32B did not cap. Speedups above the harness's
    suspicion threshold are re-verified by the harness and stored re-measured (flag `suspicious_speedup`),
    so the score takes the stored speedup as it is; a cap is for runs that want to bound the reward's scale."""

    def score(self, result: EvalResult) -> float | None:
        """`kernel_score` under this config."""
        return kernel_score(result, self.correctness_weight, self.speedup_cap)

    def reward(self, result: EvalResult) -> float | None:
        """The training reward of one turn: its score, or None when the harness itself failed on it.

        A harness failure says nothing about the kernel; scoring it 0 would punish the policy for the
        harness's fault. None reaches TRL's GRPOTrainer as NaN: that sample is left out of its group's mean
        and std and gets advantage 0.
        """
        if is_harness_error(result):
            return None
        return self.score(result)


def is_harness_error(result: EvalResult) -> bool:
    """The harness failed on this candidate (status `harness_error`, or a runtime error flagged so)."""
    return result.status == HARNESS_ERROR or HARNESS_ERROR in tuple(result.flags)


def kernel_score(result: EvalResult, correctness_weight: float = 0.3, speedup_cap: float | None = None) -> float | None:
    """`correctness_weight·correct + speedup·correct`; 0 for every status but `correct`; None for a
    `harness_error`, which is no verdict on the kernel: it is never scored (a 0 would punish the policy for
    the harness's fault), and whoever trains leaves its sample out.

    Rejected candidates (a policy check fired), incorrect ones and every kind of error score 0. A result must
    say `correct` both in its status and its flag to score: the two disagreeing is a harness fault, and
    paying for it would reward whatever produced it.
    """
    if result.status == HARNESS_ERROR:
        return None
    if result.status != CORRECT or not result.correct:
        return 0.0
    speedup = result.speedup
    # A correct result always has a finite, non-negative speedup (ref time / kernel time). Anything else
    # is a harness fault; an infinite or NaN reward would poison every advantage of its task, so fail loudly.
    if not math.isfinite(speedup) or speedup < 0:
        raise ValueError(f"correct result with invalid speedup {speedup!r}")
    if speedup_cap is not None:
        speedup = min(speedup, speedup_cap)
    return correctness_weight + speedup
