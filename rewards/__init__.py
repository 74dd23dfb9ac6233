"""Pure reward functions: EvalResult -> per-kernel score, per-turn returns, group advantages."""

from rewards.advantages import ADVANTAGE_SCALES, advantages_by_task, group_advantages
from rewards.returns import RETURN_MODES, discounted_returns, turn_returns
from rewards.score import HARNESS_ERROR, ScoreConfig, is_harness_error, kernel_score

__all__ = [
    "ADVANTAGE_SCALES",
    "HARNESS_ERROR",
    "RETURN_MODES",
    "ScoreConfig",
    "advantages_by_task",
    "discounted_returns",
    "group_advantages",
    "is_harness_error",
    "kernel_score",
    "turn_returns",
]
