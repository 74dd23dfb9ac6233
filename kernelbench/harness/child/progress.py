"""The child's progress pipe: the parent learns how far a child got (`isolation.child_spec.ChildOutcome.progress`)
from marks the worker writes to an inherited descriptor, told by an environment variable. A child without
`STARTED` never started (a harness fault, not the candidate's); `UNTRUSTED` is written, and the pipe closed,
just before untrusted code runs, so that code can neither say it nor unsay it."""

from __future__ import annotations

import os

PROGRESS_FD_ENV = "KERNEL_AGENT_PROGRESS_FD"
"""The environment variable naming the pipe's write end in the child."""
STARTED, UNTRUSTED = "S", "C"
"""The interpreter ran and the project imported; untrusted code is about to run."""


def progress(mark: str, close: bool = False) -> None:
    """Tell the parent how far this child got (`isolation.child_spec.ChildOutcome.progress`); `close` before untrusted code
    runs, so that code can neither write nor close the parent's record."""
    fd = int(os.environ.get(PROGRESS_FD_ENV, "-1") or -1)
    if fd < 0:
        return
    try:
        os.write(fd, mark.encode())
    except OSError:
        pass
    if close:
        os.environ.pop(PROGRESS_FD_ENV, None)
        try:
            os.close(fd)
        except OSError:
            pass
