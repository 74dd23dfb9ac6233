"""In the run child: the CLOCK_MONOTONIC start and end of every call of the candidate's model, for the parent's
check of which code ran during them (`kernelbench.harness.code_attribution`).

Why a wrapper: every judged, checked, verified and timed call goes through it, so the windows cover every call
alike (DESIGN.md rule 8) and no harness work between calls (loading perturbed inputs with torch's own
kernels) is counted as the candidate's. The clock is read through `time.monotonic_ns` captured at import,
before any candidate code; the windows live in the child's memory as the trial times do, so native code that
edits that memory can rewrite them, and, being a list of their own, without changing the measured speed
(the gap is stated in docs/harness.md, "Which code ran"). The cost is
two clock reads and one list append per call (well under a microsecond), inside the timed window.
"""

from __future__ import annotations

import time
from typing import Any, Callable

_NOW = time.monotonic_ns


def recorded(model: Any, windows: list[tuple[int, int]]) -> Callable[..., Any]:
    """`model`, with each call's (start_ns, end_ns) appended to `windows` (a call that raises included)."""
    now, append = _NOW, windows.append

    def call(*args: Any) -> Any:
        start = now()
        try:
            return model(*args)
        finally:
            append((start, now()))

    return call
