"""Group-normalised advantages: each sample's return against the other samples of its task.

Kevin-32B (arXiv 2507.11948) normalises over all samples of one task in the batch, every turn of every
trajectory (16 × 4 = 64 samples): `A = (R − mean) / (std + ε)`. The group is the task, not the trajectory,
so a turn is judged against every attempt at the same problem.

The std is the sample std (Bessel's correction, n − 1), as TRL's GRPO normalises (`trl.trainer.utils.nanstd`)
and as `torch.std` does by default, so advantages computed here equal the trainer's for the same group.
Over 64 samples the two conventions differ by under 1 %. `ddof=0` gives the population std.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal

AdvantageScale = Literal["std", "none"]
ADVANTAGE_SCALES: tuple[str, ...] = ("std", "none")


def group_advantages(returns: Sequence[float], eps: float = 1e-6, scale: AdvantageScale = "std",
                     ddof: int = 1) -> list[float]:
    """`(R − mean) / (std + eps)` over one task's samples (`scale="std"`), or `R − mean` (`scale="none"`,
    Dr. GRPO's choice, which keeps easy and hard tasks at their own reward scale).

    A degenerate group, all returns equal or too few samples for the std, gives zeros: nothing in it is
    better or worse than the rest, so it carries no learning signal.
    """
    if scale not in ADVANTAGE_SCALES:
        raise ValueError(f"scale must be one of {ADVANTAGE_SCALES}, got {scale!r}")
    if eps < 0 or ddof < 0:
        raise ValueError(f"eps and ddof must be >= 0, got eps={eps}, ddof={ddof}")
    values = [float(r) for r in returns]
    if not all(math.isfinite(r) for r in values):
        raise ValueError(f"returns must be finite, got {values}")
    n = len(values)
    # Exact equality, not a tolerance: fsum/n of equal floats may round away from them, and a tiny
    # spurious residual divided by a tiny std would turn into a large advantage.
    if n - ddof <= 0 or min(values, default=0.0) == max(values, default=0.0):
        return [0.0] * n
    mean = math.fsum(values) / n
    centred = [r - mean for r in values]
    if scale == "none":
        return centred
    std = math.sqrt(math.fsum(c * c for c in centred) / (n - ddof))
    return [c / (std + eps) for c in centred]


def advantages_by_task(samples: Sequence[tuple[Hashable, float]], eps: float = 1e-6,
                       scale: AdvantageScale = "std", ddof: int = 1) -> list[float]:
    """Advantages for a batch of `(task_id, return)` samples, normalised within each task, in input order.

    Samples of different tasks may be interleaved in any way (one per turn, trajectories in any order);
    the i-th advantage always belongs to the i-th sample.
    """
    positions: dict[Hashable, list[int]] = {}
    for i, (task_id, _) in enumerate(samples):
        positions.setdefault(task_id, []).append(i)
    advantages = [0.0] * len(samples)
    for idx in positions.values():
        group = group_advantages([samples[i][1] for i in idx], eps=eps, scale=scale, ddof=ddof)
        for i, a in zip(idx, group):
            advantages[i] = a
    return advantages
