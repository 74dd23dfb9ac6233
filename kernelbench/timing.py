"""Timing a forward in a child: warm-up, many trials, rotated inputs in fixed buffers, captured timers.

DESIGN.md rule 4. The timer functions are captured when this module is imported, which the worker does
BEFORE importing the candidate; timing calls the captured objects, and `timers_intact()` reports whether
the candidate replaced the public ones (flag `dynamic:timer_patched`). On CUDA each trial is bracketed by
CUDA events with a device-wide `torch.cuda.synchronize()` before the end event, so work the candidate
queued on side streams is counted (KernelBench timed only the current stream), and the L2 cache is flushed
by writing a 256 MB buffer before each trial (KernelBench's size; an H200's L2 is 50 MB).
Input sets rotate through the SAME argument buffers (their contents copied in before each call): a cache
of results keyed by the tensors' addresses then returns stale outputs, and the outputs of the last round
go back to the parent to be checked against the reference.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

_perf_counter = time.perf_counter
_CAPTURED: dict[str, Any] = {"time.perf_counter": time.perf_counter, "time.time": time.time,
                             "time.monotonic": time.monotonic}
if torch.cuda.is_available():  # attribute lookups only; creates no CUDA context
    _CAPTURED.update({"torch.cuda.Event": torch.cuda.Event, "torch.cuda.synchronize": torch.cuda.synchronize,
                      "torch.cuda.Event.record": torch.cuda.Event.record,
                      "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                      "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize})
_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
_record = torch.cuda.Event.record
_elapsed = torch.cuda.Event.elapsed_time
_event_sync = torch.cuda.Event.synchronize
L2_FLUSH_BYTES = 256 * 1024 * 1024


def _current(name: str) -> Any:
    obj: Any = {"time": time, "torch": torch}[name.split(".")[0]]
    for part in name.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def timers_intact() -> list[str]:
    """Names of captured timer objects that no longer are what they were at import (empty: intact)."""
    return [name for name, obj in _CAPTURED.items() if _current(name) is not obj]


@dataclass(frozen=True)
class TimingStats:
    """Trial times of one model in milliseconds."""

    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    total_ms: float
    trials: int
    warmup: int

    def to_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def stats(times_ms: list[float], warmup: int) -> TimingStats:
    return TimingStats(median_ms=statistics.median(times_ms), mean_ms=statistics.fmean(times_ms),
                       std_ms=statistics.pstdev(times_ms) if len(times_ms) > 1 else 0.0, min_ms=min(times_ms),
                       total_ms=sum(times_ms), trials=len(times_ms), warmup=warmup)


def _load(buffers: list[Any], values: list[Any]) -> None:
    for buf, val in zip(buffers, values):
        if isinstance(buf, torch.Tensor):
            buf.copy_(val)


def measure(fn: Callable[..., Any], arg_sets: list[list[Any]], device: str, warmup: int, trials: int,
            budget_s: float, keep: Callable[[Any], Any]) -> tuple[TimingStats, list[Any]]:
    """Time `fn` over `arg_sets` (already on `device`) rotated through one set of buffers.

    Returns the stats and `keep(output)` of the last call on each set. `budget_s` caps the time spent: a slow
    forward gets fewer trials (at least 5) rather than a timeout.
    """
    cuda = device == "cuda"
    k = len(arg_sets)
    buffers = [a.clone() if isinstance(a, torch.Tensor) else a for a in arg_sets[0]]
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if cuda else None
    with torch.no_grad():
        t0 = _perf_counter()
        for i in range(max(1, warmup)):
            _load(buffers, arg_sets[i % k])
            fn(*buffers)
        if cuda:
            _synchronize()
        per_call_s = (_perf_counter() - t0) / max(1, warmup)
        trials = max(min(5, trials), min(trials, int(budget_s / max(per_call_s, 1e-7))))
        trials = -(-trials // k) * k  # whole rounds, so the last round covers every input set
        times: list[float] = []
        last: list[Any] = [None] * k
        for i in range(trials):
            s = i % k
            _load(buffers, arg_sets[s])
            if cuda:
                flush.zero_()
                _synchronize()
                start, end = _Event(enable_timing=True), _Event(enable_timing=True)
                _record(start)
                out = fn(*buffers)
                _synchronize()  # device-wide: side-stream work finishes inside the timed window
                _record(end)
                _event_sync(end)
                times.append(_elapsed(start, end))
            else:
                t = _perf_counter()
                out = fn(*buffers)
                times.append((_perf_counter() - t) * 1e3)
            if i >= trials - k:
                last[s] = keep(out)
    return stats(times, warmup), last
