"""Pure reward functions: EvalResult -> per-kernel score, per-turn returns, group advantages."""

from rewards.advantages import ADVANTAGE_SCALES, advantages_by_task, group_advantages
from rewards.returns import RETURN_MODES, discounted_returns
from rewards.score import ScoreConfig, kernel_score

__all__ = [
    "ADVANTAGE_SCALES",
    "RETURN_MODES",
    "ScoreConfig",
    "advantages_by_task",
    "discounted_returns",
    "group_advantages",
    "kernel_score",
]
