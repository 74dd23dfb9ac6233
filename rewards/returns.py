"""Per-turn returns of one multi-turn trajectory.

Kevin-32B (arXiv 2507.11948) trains on every refinement turn as its own sample, crediting a turn with the
discounted scores of the turns it led to: `R_t = Σ_{i≥t} γ^(i−t) S_i` with γ = 0.4. Its max variant,
`R_t = max_{i≥t} γ^(i−t) S_i`, with γ = 0.8 did better with fewer turns: a turn is credited with the best
kernel it led to rather than the sum, so a long trajectory does not earn more for its length alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

ReturnMode = Literal["sum", "max"]
RETURN_MODES: tuple[str, ...] = ("sum", "max")


def discounted_returns(scores: Sequence[float], gamma: float = 0.4, mode: ReturnMode = "sum") -> list[float]:
    """Return R_t for each turn t of one trajectory, given its per-turn scores S_0..S_{T-1} in turn order.

    Computed backwards through the recurrences `R_t = S_t + γ·R_{t+1}` (sum) and `R_t = max(S_t, γ·R_{t+1})`
    (max), which equal the closed forms above because γ ≥ 0 commutes with max.
    """
    if mode not in RETURN_MODES:
        raise ValueError(f"mode must be one of {RETURN_MODES}, got {mode!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must lie in [0, 1], got {gamma}")
    if not all(math.isfinite(s) for s in scores):
        raise ValueError(f"scores must be finite, got {list(scores)}")
    returns = [0.0] * len(scores)
    later: float | None = None  # R_{t+1}; none after the last turn
    for t in range(len(scores) - 1, -1, -1):
        s = float(scores[t])
        if later is None:
            r = s
        elif mode == "sum":
            r = s + gamma * later
        else:
            r = max(s, gamma * later)
        returns[t] = r
        later = r
    return returns


def turn_returns(scores: Sequence[float | None], gamma: float = 0.4, mode: ReturnMode = "sum") -> list[float | None]:
    """`discounted_returns` where some scores are unknown (None: the harness failed on that turn).

    An unknown turn's own return is None (it is left out of training). Earlier turns are credited with
    the known later scores only: the unknown term is dropped from the sum (or the max), never read as 0
    in its own sample's place.
    """
    known = [0.0 if s is None else s for s in scores]
    if mode == "max":
        # A dropped term must not win the max: give it the lowest value the sum of known scores can take.
        floor = min([s for s in scores if s is not None], default=0.0)
        known = [floor if s is None else s for s in scores]
    returns: list[float | None] = list(discounted_returns(known, gamma=gamma, mode=mode))
    return [None if s is None else r for s, r in zip(scores, returns)]
