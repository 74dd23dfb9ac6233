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

import gc
import os
import random
import select
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


class Measurement:
    """One model's timing session: warm-up, blocks of timed trials, the untimed verification round.

    `measure` runs one block of all the trials; paired timing (CPU) runs many short blocks, each when the
    parent says so, interleaved with the reference's (`serve_blocks`).
    """

    def __init__(self, fn: Callable[..., Any], arg_sets: list[list[Any]], device: str, keep: Callable[[Any], Any],
                 checks: list[tuple[int, float]] | tuple = (), planned_trials: int = 0):
        self.t = TIMERS  # one read: swapping the module's attribute mid-measurement changes nothing here
        self.fn, self.arg_sets, self.device, self.keep = fn, arg_sets, device, keep
        self.cuda = device == "cuda"
        self.buffers = [a.clone() if isinstance(a, torch.Tensor) else a for a in arg_sets[0]]
        self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if self.cuda else None
        self.calls = 0
        self.times_ms: list[float] = []
        # Hidden check calls (see `check_outputs`): each one before a trial index drawn from the OS's entropy.
        self.checks = [(int(k), float(g)) for k, g in checks]
        self.check_outputs: list[Any] = [None] * len(self.checks)
        slots = random.SystemRandom().sample(range(max(planned_trials, len(self.checks))), len(self.checks))
        self._check_before = dict(zip(slots, range(len(self.checks))))
        self._trial = 0

    def _check(self, j: int) -> None:
        """Untimed call on input set k scaled by the parent's secret factor g; its output goes to the parent.

        Why: a candidate that counts calls (or recognises the exact base sets of the verification round) can
        skip its work on the timed calls and compute only where outputs are judged. A check call looks like
        any timed call (a fresh scale in the same range, in the same buffers, at an unpredictable position),
        and the reference child computed the same call's output beforehand, so skipping work on timed calls
        is caught with the probability that a check lands among them."""
        k, g = self.checks[j]
        load_scaled(self.buffers, self.arg_sets[k % len(self.arg_sets)], g)
        out = self.fn(*self.buffers)
        if self.cuda:
            self.t.synchronize()
        self.check_outputs[j] = self.keep(out)

    def _load_next(self) -> None:
        load_scaled(self.buffers, self.arg_sets[self.calls % len(self.arg_sets)], self.t.uniform(*SCALE_RANGE))
        self.calls += 1

    def warm_up(self, n: int) -> float:
        """`n` (at least 1) untimed calls; returns the seconds per call they took."""
        t = self.t
        with torch.no_grad():
            t0 = t.perf_counter()
            for _ in range(max(1, n)):
                self._load_next()
                self.fn(*self.buffers)
            if self.cuda:
                t.synchronize()
            return (t.perf_counter() - t0) / max(1, n)

    def block(self, n: int) -> list[float]:
        """`n` timed trials (ms), each on freshly scaled inputs; also appended to `times_ms`."""
        t, fn, buffers = self.t, self.fn, self.buffers
        times: list[float] = []
        # No cyclic collection inside a block (as `timeit` does): a pass over a process with torch loaded takes
        # milliseconds, would land in a random trial, and, outside the trials, in the untimed time that
        # `paired.unaccounted` compares between the two children.
        collecting = gc.isenabled()
        gc.disable()
        try:
            with torch.no_grad():
                for _ in range(n):
                    j = self._check_before.get(self._trial)
                    if j is not None:
                        self._check(j)
                    self._trial += 1
                    self._load_next()
                    if self.cuda:
                        self.flush.zero_()
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
        finally:
            if collecting:
                gc.enable()
        self.times_ms += times
        return times

    def run_checks(self) -> list[Any]:
        """Every check call not yet made (fewer trials ran than planned, or none: the reference computing the
        expected outputs); returns `check_outputs`."""
        with torch.no_grad():
            for j, done in enumerate(self.check_outputs):
                if done is None:
                    self._check(j)
        return self.check_outputs

    def verify(self) -> list[Any]:
        """Left-over check calls, then an untimed round over the unperturbed base sets in the same buffers:
        `keep(output)` of each base set."""
        self.run_checks()
        last: list[Any] = []
        with torch.no_grad():
            for s in self.arg_sets:
                load_scaled(self.buffers, s, 1.0)
                out = self.fn(*self.buffers)
                if self.cuda:
                    self.t.synchronize()
                last.append(self.keep(out))
        return last


def measure(fn: Callable[..., Any], arg_sets: list[list[Any]], device: str, warmup: int, trials: int,
            budget_s: float, keep: Callable[[Any], Any],
            checks: list[tuple[int, float]] | tuple = ()) -> tuple[TimingStats, list[Any], list[Any]]:
    """Time `fn` over `arg_sets` (already on `device`), each call on freshly scaled values in one set of buffers.

    Returns the stats, `keep(output)` of an untimed final round on the unperturbed sets, and of each hidden
    check call (`Measurement._check`). `budget_s` caps the time spent: a slow forward gets fewer trials (at
    least 5) rather than a timeout.
    """
    m = Measurement(fn, arg_sets, device, keep, checks, trials)
    per_call_s = m.warm_up(warmup)
    m.block(max(min(5, trials), min(trials, int(budget_s / max(per_call_s, 1e-7)))))
    last = m.verify()
    return stats(m.times_ms, warmup), last, m.check_outputs


class Channel:
    """The paired-timing line protocol over two pipe ends: the child's side (`serve_blocks`) and, with a
    deadline on `receive`, the parent's (`kernelbench.paired.Pipes`)."""

    MAX_LINE = 64

    def __init__(self, read_fd: int, write_fd: int):
        self.read_fd, self.write_fd = read_fd, write_fd
        # captured: a candidate rebinding os.read or select.select changes nothing
        self._read, self._write, self._select = os.read, os.write, select.select
        self._pending = b""

    def send(self, text: str) -> None:
        self._write(self.write_fd, text.encode() + b"\n")

    def receive(self, deadline: float | None = None) -> str:
        """One line; "" on EOF, on a line longer than MAX_LINE, or at `deadline` (perf_counter) when given."""
        while b"\n" not in self._pending:
            if deadline is not None:
                left = deadline - time.perf_counter()
                if left <= 0 or not self._select([self.read_fd], [], [], left)[0]:
                    return ""
            chunk = self._read(self.read_fd, 256)
            if not chunk:
                return ""
            self._pending += chunk
            if len(self._pending) > self.MAX_LINE:
                return ""
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode("ascii", "replace")


def serve_blocks(m: Measurement, warmup: int, channel: Channel) -> list[list[float]]:
    """Paired timing, child side: warm up, say `ready <ms per call>`, then time `n` trials on each `T n`
    and answer `done`, until `E`. Returns the blocks' times (ms)."""
    per_call_ms = 1e3 * m.warm_up(warmup)
    channel.send(f"ready {per_call_ms:.6f}")
    blocks: list[list[float]] = []
    while True:
        line = channel.receive()
        if line.startswith("T ") and line[2:].isdigit():
            blocks.append(m.block(int(line[2:])))
            channel.send("done")
        elif line == "E":
            return blocks
        else:
            raise RuntimeError(f"paired timing: unexpected command {line[:20]!r}")
