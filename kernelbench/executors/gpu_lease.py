"""One timing run per GPU at a time, across every process of a machine.

Why across processes: each training process builds its own evaluator (`train/grpo.py`), so a thread-local
pool of GPUs would let eight ranks time on one evaluation GPU at once. An exclusive `flock` on one file per
GPU (in the machine's temporary folder) serialises them: the kernel drops the lock when its holder dies, so
a crashed process never leaves a GPU held.
"""

from __future__ import annotations

import fcntl
import os
import queue
import re
import tempfile
from contextlib import contextmanager
from typing import Iterator

LOCK_DIR = os.path.join(tempfile.gettempdir(), "kernel-agent-gpu-leases")


def lock_path(gpu: str) -> str:
    """The lock file of one `CUDA_VISIBLE_DEVICES` entry (an index or a UUID)."""
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", gpu):
        raise ValueError(f"not a GPU id: {gpu!r}")
    return os.path.join(LOCK_DIR, f"gpu-{gpu}.lock")


@contextmanager
def held(gpu: str) -> Iterator[str]:
    """Hold GPU `gpu` exclusively (blocks while another process or thread holds it)."""
    os.makedirs(LOCK_DIR, mode=0o1777, exist_ok=True)
    fd = os.open(lock_path(gpu), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # per open file description: two threads' opens exclude each other too
        yield gpu
    finally:
        os.close(fd)  # releases the lock


class GpuPool:
    """The GPUs of one evaluator: `lease()` takes a free one (this process's workers never share one) and
    holds it machine-wide (`held`) for the duration of one run."""

    def __init__(self, gpus: tuple[str, ...]):
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"each GPU once: {gpus}")
        for g in gpus:
            lock_path(g)  # validates the id
        self.gpus = tuple(gpus)
        self._free: queue.Queue[str] = queue.Queue()
        for g in gpus:
            self._free.put(g)

    @contextmanager
    def lease(self) -> Iterator[str]:
        gpu = self._free.get()
        try:
            with held(gpu):
                yield gpu
        finally:
            self._free.put(gpu)
