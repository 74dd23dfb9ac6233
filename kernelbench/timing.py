"""Timing a forward in a child: warm-up, many trials, fresh input values in fixed buffers, captured timers.

DESIGN.md rule 4. The timer functions are captured in `TIMERS` when this module is imported, which the worker
does BEFORE importing the candidate; `measure` reads `TIMERS` once into a local at its start, so a candidate
that swaps a timer in the middle of a measurement times nothing of its own. The worker verifies after every
phase that `TIMERS`, this module's functions and the public timers are still the objects captured here
(`kernelbench.worker`, flag `dynamic:timer_patched`). On CUDA each trial is bracketed by CUDA events with a
device-wide `torch.cuda.synchronize()` before the end event, so work the candidate queued on side streams is
counted (KernelBench timed only the current stream), and the L2 cache is flushed by writing a 256 MB buffer
before each trial (KernelBench's size; an H200's L2 is 50 MB).

Inputs: every call `measure` makes (warm-up and timed trials) sees input contents never seen before. Input sets
rotate through the SAME argument buffers, and before each call, outside the timed window, the base set is
copied in with every floating tensor multiplied by a fresh factor drawn uniformly from [0.5, 2] (integer
tensors are indices and stay as they are). A positive factor keeps each value's sign, so domains such as
`log` and `sqrt` stay valid. The factors come from `random.SystemRandom` (the OS's entropy: no generator
state in the process for a candidate to read). Why: KernelBench-style timing repeats a few input sets, so
a kernel that caches outputs by a fingerprint of the VALUES would time lookups (a 180x "speedup" on a naive
matmul); with fresh values it never hits and is timed honestly. After the trials, one untimed verification
round runs every UNPERTURBED base set through the same buffers; those outputs go back to the parent, which
holds their reference outputs: a cache keyed by the buffers' ADDRESSES serves stale data there and is
judged incorrect. The reference is timed by this same function (same procedure, its own draws), so the
comparison stays fair.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import torch


class Timers(NamedTuple):
    """The objects a measurement depends on, captured at import (immutable: a tuple)."""

    perf_counter: Callable[[], float]
    event: Any
    synchronize: Callable[..., Any]
    record: Callable[..., Any]
    elapsed: Callable[..., Any]
    event_sync: Callable[..., Any]
    uniform: Callable[[float, float], float]


TIMERS = Timers(time.perf_counter, torch.cuda.Event, torch.cuda.synchronize, torch.cuda.Event.record,
                torch.cuda.Event.elapsed_time, torch.cuda.Event.synchronize, random.SystemRandom().uniform)
PUBLIC_TIMERS: dict[str, Any] = {"time.perf_counter": time.perf_counter, "time.time": time.time,
                                 "time.monotonic": time.monotonic, "time.perf_counter_ns": time.perf_counter_ns,
                                 "torch.cuda.Event": torch.cuda.Event, "torch.cuda.synchronize": torch.cuda.synchronize,
                                 "torch.cuda.Event.record": torch.cuda.Event.record,
                                 "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                                 "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize}
"""Public names of the timers (attribute lookups only; no CUDA context is created)."""
L2_FLUSH_BYTES = 256 * 1024 * 1024
SCALE_RANGE = (0.5, 2.0)
"""Per-call factor applied to floating inputs during timing (see the module docstring)."""


def _current(name: str) -> Any:
    obj: Any = {"time": time, "torch": torch}[name.split(".")[0]]
    for part in name.split(".")[1:]:
        obj = getattr(obj, part, None)
    return obj


def timers_intact() -> list[str]:
    """Names of public timer objects that no longer are what they were at import (empty: intact)."""
    return [name for name, obj in PUBLIC_TIMERS.items() if _current(name) is not obj]


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


def load_scaled(buffers: list[Any], values: list[Any], factor: float) -> None:
    """Copy one base set into the argument buffers, floating tensors multiplied by `factor` (1: exact copy)."""
    for buf, val in zip(buffers, values):
        if not isinstance(buf, torch.Tensor):
            continue
        if factor != 1.0 and (buf.is_floating_point() or buf.is_complex()):
            torch.mul(val, factor, out=buf)
        else:
            buf.copy_(val)


def measure(fn: Callable[..., Any], arg_sets: list[list[Any]], device: str, warmup: int, trials: int,
            budget_s: float, keep: Callable[[Any], Any]) -> tuple[TimingStats, list[Any]]:
    """Time `fn` over `arg_sets` (already on `device`), each call on freshly scaled values in one set of buffers.

    Returns the stats and `keep(output)` of an untimed final round on the unperturbed sets. `budget_s` caps
    the time spent: a slow forward gets fewer trials (at least 5) rather than a timeout.
    """
    t = TIMERS  # one read: swapping the module's attribute mid-measurement changes nothing here
    cuda = device == "cuda"
    k = len(arg_sets)
    buffers = [a.clone() if isinstance(a, torch.Tensor) else a for a in arg_sets[0]]
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if cuda else None
    with torch.no_grad():
        t0 = t.perf_counter()
        for i in range(max(1, warmup)):
            load_scaled(buffers, arg_sets[i % k], t.uniform(*SCALE_RANGE))
            fn(*buffers)
        if cuda:
            t.synchronize()
        per_call_s = (t.perf_counter() - t0) / max(1, warmup)
        trials = max(min(5, trials), min(trials, int(budget_s / max(per_call_s, 1e-7))))
        times: list[float] = []
        for i in range(trials):
            load_scaled(buffers, arg_sets[i % k], t.uniform(*SCALE_RANGE))
            if cuda:
                flush.zero_()
                t.synchronize()
                start, end = t.event(enable_timing=True), t.event(enable_timing=True)
                t.record(start)
                fn(*buffers)
                t.synchronize()  # device-wide: side-stream work finishes inside the timed window
                t.record(end)
                t.event_sync(end)
                times.append(t.elapsed(start, end))
            else:
                t1 = t.perf_counter()
                fn(*buffers)
                times.append((t.perf_counter() - t1) * 1e3)
        last: list[Any] = []
        for s in range(k):  # verification round: base values, same buffers, untimed
            load_scaled(buffers, arg_sets[s], 1.0)
            out = fn(*buffers)
            if cuda:
                t.synchronize()
            last.append(keep(out))
    return stats(times, warmup), last
