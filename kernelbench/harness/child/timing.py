"""Timing a forward in a child: warm-up, many trials, fresh input values in fixed buffers, captured timers.

DESIGN.md rule 4. The timer functions are captured in `TIMERS` when this module is imported, which the worker
does BEFORE importing the candidate; `measure` reads `TIMERS` once into a local at its start, so a candidate
that swaps a timer in the middle of a measurement times nothing of its own. The worker verifies after every
phase that `TIMERS`, this module's functions and the public timers are still the objects captured here
(`kernelbench.harness.child.worker`, flag `dynamic:timer_patched`). On CUDA each trial is bracketed by CUDA events with a
device-wide `torch.cuda.synchronize()` before the end event, so work the candidate queued on side streams is
counted (KernelBench timed only the current stream), and the L2 cache is flushed by writing a 256 MB buffer
before each trial (KernelBench's size; an H200's L2 is 50 MB).

Inputs: every call `measure` makes (warm-up and timed trials) sees input contents never seen before. The
timing base sets are their own draws of `get_inputs()` from secret seeds (`inputs.make_timing_sets`), never a
correctness set; each call takes one drawn uniformly (`_load_next`), in one set of argument buffers (allocated
afresh for every block), and
before each call, outside the timed window, the base set with every floating ELEMENT multiplied by its own
factor drawn uniformly from 256 levels in [0.5, 2] (integer tensors are indices and stay as they are),
is written in by the one op that computes it (`call_inputs.Perturbation.write`; every other call's values by one
`copy_`, `call_inputs.write_inputs`: one write per tensor, so no tensor metadata tells a timed call from a
judged one), the factors from a generator seeded from the OS's entropy. Positive factors keep each value's sign,
so domains such as `log` and `sqrt` stay valid. Why element-wise: with one factor per call a timed input was
a scalar multiple of a set the candidate had seen, and a task whose first stage is linear could cache that
stage per set and scale it (111x "speedup", correct); a value-keyed cache never hits either (180x on a naive
matmul before fresh values). Hidden check calls (`Measurement._check`) sit among the trials, a binomial
count at uniform positions, as if each trial were preceded by one independently (`Measurement.place_checks`);
after the trials one untimed verification round runs every UNPERTURBED base set through the same
buffers. Each check and verification call's output, and the buffers after it, go to the parent, which holds
the reference's outputs and the inputs those calls must have left unchanged. The reference is timed by this
same code (same procedure, same untimed work, its own draws), so the comparison stays fair.
"""

from __future__ import annotations

import gc
import os
import random
import select
import statistics
import time
from typing import Any, Callable, NamedTuple

import torch

from kernelbench.harness.protocol import CHECK_POOL_FACTOR, Timing
from kernelbench.harness.child.call_inputs import (FACTOR_LEVELS, SCALE_RANGE, Perturbation, check_inputs,  # noqa: F401
                                                   fits, fresh_buffers, write_inputs)
from kernelbench.harness.child.outputs import plain_copy


class Timers(NamedTuple):
    """The objects a measurement depends on, captured at import (immutable: a tuple)."""

    perf_counter: Callable[[], float]
    event: Any
    synchronize: Callable[..., Any]
    record: Callable[..., Any]
    elapsed: Callable[..., Any]
    event_sync: Callable[..., Any]
    uniform: Callable[[float, float], float]
    entropy: Callable[[int], int]


TIMERS = Timers(time.perf_counter, torch.cuda.Event, torch.cuda.synchronize, torch.cuda.Event.record,
                torch.cuda.Event.elapsed_time, torch.cuda.Event.synchronize, random.SystemRandom().uniform,
                random.SystemRandom().getrandbits)
PUBLIC_TIMERS: dict[str, Any] = {"time.perf_counter": time.perf_counter, "time.time": time.time,
                                 "time.monotonic": time.monotonic, "time.perf_counter_ns": time.perf_counter_ns,
                                 "torch.cuda.Event": torch.cuda.Event, "torch.cuda.synchronize": torch.cuda.synchronize,
                                 "torch.cuda.Event.record": torch.cuda.Event.record,
                                 "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                                 "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize}
"""Public names of the timers (attribute lookups only; no CUDA context is created)."""
L2_FLUSH_BYTES = 256 * 1024 * 1024


def _current(name: str) -> Any:
    obj: Any = {"time": time, "torch": torch}[name.split(".")[0]]
    for part in name.split(".")[1:]:
        obj = getattr(obj, part, None)
    return obj


def timers_intact() -> list[str]:
    """Names of public timer objects that no longer are what they were at import (empty: intact)."""
    return [name for name, obj in PUBLIC_TIMERS.items() if _current(name) is not obj]


def stats(times_ms: list[float], warmup: int) -> Timing:
    """The protocol's record of `times_ms` (one model's trial times), as both children report it."""
    return Timing(median_ms=statistics.median(times_ms), mean_ms=statistics.fmean(times_ms),
                  std_ms=statistics.pstdev(times_ms) if len(times_ms) > 1 else 0.0, min_ms=min(times_ms),
                  total_ms=sum(times_ms), trials=len(times_ms), warmup=warmup)


class Measurement:
    """One model's timing session: warm-up, blocks of timed trials with hidden check calls among them, the
    untimed verification round.

    `measure` runs one block of all the trials; paired timing (CPU) runs many short blocks, each when the
    parent says so, interleaved with the reference's (`serve_blocks`). `emit(label, output, buffers)` receives
    each check call's and each verification call's output and the argument buffers after the call, as soon as
    the call returns (the run child sends them to the parent at once: `kernelbench.harness.child.report`).
    """

    def __init__(self, fn: Callable[..., Any], arg_sets: list[list[Any]], device: str,
                 emit: Callable[[str, Any, list[Any]], None], checks: list[tuple[int, int]] | tuple = ()):
        self.t = TIMERS  # one read: swapping the module's attribute mid-measurement changes nothing here
        self.fn, self.arg_sets, self.device, self.emit = fn, arg_sets, device, emit
        self.cuda = device == "cuda"
        self.buffers = fresh_buffers(arg_sets[0])
        self.perturbations = [Perturbation(s) for s in arg_sets]
        self.flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if self.cuda else None
        self.calls = 0
        self.times_ms: list[float] = []
        self.checks = [(int(k), int(s)) for k, s in checks]
        self.checks_done: set[int] = set()
        self._next_check = 0
        self.held: list[tuple[str, Any, list[Any]]] = []
        self.checks_judged: int | None = None
        """Paired timing: the count of check calls the parent judges (`E n`; None: a bare `E`)."""

    def _check(self, j: int, hold: bool = False) -> None:
        """Untimed call on timing set k perturbed by the parent's secret seed; its output and the buffers after
        it go to `emit`, at once or (`hold`, among the trials) as copies when `send_held` is called.

        Why: a candidate that counts calls (or recognises the verification round) can skip its work on the
        timed calls and compute only where outputs are judged. A check call looks like any timed call (values
        made by the same function from a seed, `_inputs`, in the same buffers, at a position drawn from the
        OS's entropy among the trials that run, `place_checks`), and the reference child computes the same
        call's output, so skipping work on timed calls is caught whenever a check lands among them; the
        buffers after it show a kernel that writes its inputs during timing.

        Why held among the trials: the report of a check (serialised, through a pipe) took 60-100 ms on
        L1/26_matrix_scalar_multiply at the CPU size, against 2 ms per trial, and its noise under load decided
        `paired.unaccounted`'s comparison of the two children's blocks; a plain copy is a memory copy, the
        same on both sides, and the report is sent after the block (`serve_blocks`), outside what the parent
        measures. That a candidate can tell a check happened after the fact (the copy takes time) gives it
        nothing: each trial is preceded by a check independently (`place_checks`)."""
        k, seed = self.checks[j]
        args = self._inputs(k % len(self.arg_sets), seed)
        out = self.fn(*args)
        if self.cuda:
            self.t.synchronize()
        self.checks_done.add(j)
        if hold:
            self.held.append((f"check/{j}", plain_copy(out), [plain_copy(b) for b in self.buffers]))
        else:
            self.emit(f"check/{j}", out, self.buffers)

    def send_held(self) -> None:
        """Emit the check calls held since the last call (`_check(hold=True)`), in order."""
        held, self.held = self.held, []
        for label, out, buffers in held:
            self.emit(label, out, buffers)

    def _inputs(self, k: int, seed: int) -> list[Any]:
        """A call's arguments, in the buffers: base set `k` perturbed from `seed` (`Perturbation.write`, the
        values `check_inputs` makes), one write per tensor. Timed and check calls both come here, so the time
        before a call (preparing its values) cannot tell them apart: a check's values used to come from a CPU generator and a timed call's
        from one on the device, which on CUDA made a check's preparation the slower by a host-to-device copy."""
        return self.perturbations[k].write(self.buffers, seed)

    def _load_next(self) -> list[Any]:
        """The next timed call's arguments: freshly perturbed values of a base set drawn uniformly, from a seed
        drawn, both from the OS's entropy (`_inputs`).

        Why the set is drawn: the perturbation keeps each element's sign and its size within a factor of 4, so a
        few elements name a call's base set. Timed calls used to rotate through the sets (`calls % 4`) and checks
        through theirs in order; a candidate that counted both (a held check's copies show in the allocator at
        the next call) knew which calls only the timed rotation could be and skipped 3 in 4 of them:
        `tests/adversarial/set_schedule_skip.py`, `correct` at 5.5x. Drawn, as each check's is
        (`children.timing_checks`), a set says nothing about a call's kind."""
        args = self._inputs(self.t.entropy(62) % len(self.arg_sets), self.t.entropy(62))
        self.calls += 1
        return args

    def warm_up(self, n: int) -> float:
        """`n` (at least 1) untimed calls; returns the seconds per call they took."""
        t = self.t
        with torch.no_grad():
            t0 = t.perf_counter()
            for _ in range(max(1, n)):
                self.fn(*self._load_next())
            if self.cuda:
                t.synchronize()
            return (t.perf_counter() - t0) / max(1, n)

    def place_checks(self, n: int, count: int) -> dict[int, list[int]]:
        """The next `count` check calls (while the pool lasts), before distinct trial positions drawn uniformly
        from the OS's entropy among `n`.

        Why a count drawn from a binomial (by the parent in paired timing, `paired.draw_checks`; by `measure`
        otherwise) and uniform positions: together they are an independent draw before each trial. A candidate
        can learn after the fact that a check has just run (its output is sent to the parent before the next
        call, a gap in time between calls); with a fixed count per block (one, as before) the calls after it
        were safe to skip until the block's end (new buffers mark the next one):
        `tests/adversarial/skip_after_check.py`. Now a check just seen says nothing about the next call."""
        left = len(self.checks) - self._next_check
        rng = random.SystemRandom()
        placed: dict[int, list[int]] = {}
        for i in sorted(rng.sample(range(max(0, n)), max(0, min(count, left, n)))):
            placed[i] = [self._next_check]
            self._next_check += 1
        return placed

    def block(self, n: int, checks: int = 1) -> list[float]:
        """`n` timed trials (ms), each on freshly perturbed inputs in buffers allocated for this block, with
        `checks` check calls (while any remain) among them (`place_checks`); also appended to `times_ms`."""
        t, fn = self.t, self.fn
        self.buffers = fresh_buffers(self.arg_sets[0])  # new buffers per block: an address says little about the phase
        buffers = self.buffers
        placed = self.place_checks(n, checks)
        times: list[float] = []
        # No cyclic collection inside a block (as `timeit` does): a pass over a process with torch loaded takes
        # milliseconds, would land in a random trial, and, outside the trials, in the untimed time that
        # `paired.unaccounted` compares between the two children.
        collecting = gc.isenabled()
        gc.disable()
        try:
            with torch.no_grad():
                for i in range(n):
                    for j in placed.get(i, ()):
                        self._check(j, hold=True)
                    args = self._load_next()
                    if self.cuda:
                        self.flush.zero_()
                        t.synchronize()
                        start, end = t.event(enable_timing=True), t.event(enable_timing=True)
                        t.record(start)
                        fn(*args)
                        t.synchronize()  # device-wide: side-stream work finishes inside the timed window
                        t.record(end)
                        t.event_sync(end)
                        times.append(t.elapsed(start, end))
                    else:
                        t1 = t.perf_counter()
                        fn(*args)
                        times.append((t.perf_counter() - t1) * 1e3)
        finally:
            if collecting:
                gc.enable()
        self.times_ms += times
        return times

    def run_checks(self) -> None:
        """Every check call not yet made (fewer blocks ran than there are checks, or none: the reference
        computing the expected outputs)."""
        with torch.no_grad():
            for j in range(len(self.checks)):
                if j not in self.checks_done:
                    self._check(j)

    def verify(self, leftovers: bool = True) -> None:
        """Left-over check calls (`leftovers`), then an untimed round over the unperturbed base sets in the same
        buffers, each output passed to `emit` as `verify/<set>`.

        Paired timing skips the left-overs: the parent drew every block's count and asks for the checks that ran
        among the trials alone (`verdict.checks_asked`); the rest, untimed, judged nothing a verification call
        does not and cost 0.4 s of a 4.3 s evaluation (8 MB ReLU). Unpaired, the count is drawn here (`measure`)."""
        if leftovers:
            self.run_checks()
        with torch.no_grad():
            for i, s in enumerate(self.arg_sets):
                out = self.fn(*write_inputs(self.buffers, s))
                if self.cuda:
                    self.t.synchronize()
                self.emit(f"verify/{i}", out, self.buffers)


MIN_TRIALS = 10
"""Default floor of timed trials per side (`EvalConfig.min_timing_trials`)."""


def trial_count(trials: int, floor: int, budget_s: float, per_call_s: float) -> int:
    """Trials for a budget: `trials`, fewer when the calls are slow, never fewer than `min(floor, trials)`.
    Why a floor: the per-call time comes from the candidate's own warm-up, which it can make as slow as it
    likes; below the floor it buys nothing."""
    return max(min(floor, trials), min(trials, int(budget_s / max(per_call_s, 1e-7))))


def measure(fn: Callable[..., Any], arg_sets: list[list[Any]], device: str, warmup: int, trials: int,
            budget_s: float, emit: Callable[[str, Any, list[Any]], None],
            checks: list[tuple[int, int]] | tuple = (), floor: int = MIN_TRIALS) -> Timing:
    """Time `fn` over `arg_sets` (already on `device`), each call on freshly perturbed values.

    Every check call lands among the trials that run (positions drawn after the count is fixed); then the
    verification round. `budget_s` caps the time spent: a slow forward gets fewer trials (at least `floor`)
    rather than a timeout.
    """
    m = Measurement(fn, arg_sets, device, emit, checks)
    per_call_s = m.warm_up(warmup)
    n = trial_count(trials, floor, budget_s, per_call_s)
    m.block(n, checks=binomial(n, len(m.checks) / CHECK_POOL_FACTOR / max(1, n)))
    m.send_held()
    m.verify()
    return stats(m.times_ms, warmup)


class Channel:
    """The paired-timing line protocol over two pipe ends: the child's side (`serve_blocks`) and, with a
    deadline on `receive`, the parent's (`kernelbench.harness.paired.Pipes`)."""

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


INPUTS_READY = "inputs"
"""Paired timing: the reference child's first line, once `inputs.pt` is written; the parent then hands the
inputs to the run child, started beside the reference, with `GO`."""
GO = "G"
"""Paired timing: the parent's first line to the run child, once its `inputs.pt` is in place.

Why the run child starts before its inputs exist: starting it only when the reference is ready left one core
idle for the run child's whole start-up (a sandbox, `import torch`, the harness's warm-ups: about 3 s on a
2-core VM, a fifth of a warm evaluation); now that start-up runs beside the reference's."""


def await_inputs(channel: Channel) -> None:
    """Run child, paired timing: block until the parent says its inputs are in place (before any candidate
    code runs). Anything else is the harness's fault, raised."""
    line = channel.receive()
    if line != GO:
        raise RuntimeError(f"paired timing: expected {GO!r} before the inputs, got {line[:20]!r}")


DONE = "done"
"""Paired timing: a child's answer once a block's trials are over (the parent's reading of the block ends here)."""
SEND = "S"
"""Paired timing: the parent's word, once it has read the block's CPU accounting, to report its check calls."""
SENT = "sent"
"""Paired timing: a child's answer once the block's check calls are reported (outside the measured block)."""


def serve_blocks(m: Measurement, warmup: int, channel: Channel) -> list[list[float]]:
    """Paired timing, child side: warm up, say `ready <ms per call>`, then time `n` trials with `c` check calls
    among them (`Measurement.place_checks`; the parent draws `c`, the same for both children) on each `T n c`
    and answer `done`; then send the block's held check calls (`Measurement.send_held`) and say `sent`; until
    `E` (the run child's end) or `E n` (the reference's: the parent judges the first `n` check calls of the pool,
    kept in `m.checks_judged`). Returns the blocks' times (ms)."""
    per_call_ms = 1e3 * m.warm_up(warmup)
    channel.send(f"ready {per_call_ms:.6f}")
    blocks: list[list[float]] = []
    while True:
        line = channel.receive()
        parts = line.split(" ")
        if len(parts) == 3 and parts[0] == "T" and parts[1].isdigit() and parts[2].isdigit():
            blocks.append(m.block(int(parts[1]), int(parts[2])))
            channel.send(DONE)
            if channel.receive() != SEND:  # the parent's readings of the block first: reports are not in them
                raise RuntimeError("paired timing: no word to send the block's check calls")
            m.send_held()
            channel.send(SENT)
        elif line == "E":
            return blocks
        elif len(parts) == 2 and parts[0] == "E" and parts[1].isdigit():
            m.checks_judged = int(parts[1])
            return blocks
        else:
            raise RuntimeError(f"paired timing: unexpected command {line[:20]!r}")


def binomial(n: int, p: float) -> int:
    """A Binomial(n, p) count from the OS's entropy: the number of `n` trials preceded by a check when each is,
    independently, with probability `p` (capped at 1)."""
    rng = random.SystemRandom()
    p = min(1.0, max(0.0, p))
    return sum(rng.random() < p for _ in range(max(0, n)))
