"""Paired timing, parent side: the reference child and the candidate child timed in alternating blocks.

Why: on a shared CPU machine the memory bandwidth one process gets drifts by tens of percent within a
second (measured on a 2-core VM: block medians of one 8 MB ReLU moved 0.4 -> 1.0 ms from one 25 ms block
to the next, in one process). A speedup taken as the ratio of two medians measured seconds apart, in two
processes, carries that drift: its coefficient of variation over repeated evaluations was 18-29 % for a
memory-bound kernel. Timing the two in alternating short blocks and taking the median of the per-round
ratios cancels every drift slower than a round: with `scripts/bench_harness.py` on the same VM the CV fell
to 4-11 % for that kernel and 1-3 % for a compute-bound one (docs/harness.md, "Measured").

Protocol (one line per message over two pipes per child, `kernelbench.harness.child.timing.serve_blocks` is the child
side): each child warms up and says `ready <ms per call>`; per round the parent sends `T n c` (n trials, c
hidden check calls among them, the same for both, `draw_checks`) to one child,
waits for `done` (the block's readings end there), says `S` once it has read them and waits for `sent` (the
block's check calls reported), then to the other (the order alternates between rounds); `E` ends it. The reference is
trusted; the candidate's answers are not: a wrong or missing answer ends the pairing (the candidate's
verdict then comes from its exit), and the parent times every block itself, so the trial times the
candidate reports later must fit inside its blocks (`overruns`) and leave no more of them unaccounted for
than the reference's trials leave of its own (`unaccounted`); otherwise `timing_inconsistent`. While the reference times a block the
candidate's whole sandbox is frozen (its cgroup's freezer, `sandbox.RunningChild.freeze`), so nothing it left
running can slow the reference down; and the CPU time of every task in the candidate's cgroup during its own
blocks must fit the cores it was given (`parallel_work`), so work done beside the timed calls in another
process, whatever its session or clone flags, is charged.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from kernelbench.harness import protocol
from kernelbench.harness.isolation import cgroups, sandbox
from kernelbench.harness.isolation.sandbox_cpu import busiest_thread_s, sandbox_runnable_ns, schedstats, tasks_cpu_s, thread_times  # noqa: F401
from kernelbench.harness.child.timing import DONE, MIN_TRIALS, SEND, SENT, Channel, binomial
from kernelbench.harness.paired_judge import (  # noqa: F401  (the judging half, read as `paired.X` too)
    PARALLEL_SLACK, UNACCOUNTED_RATIO, UNACCOUNTED_SLACK, block_medians, overruns, paired_speedup, parallel_work,
    unaccounted, unaccounted_wall)

REFERENCE_STOPPED = "the reference stopped answering"


class Pipes:
    """Two pipes to one child: commands down, answers up. `child_fds` are the ends the child inherits."""

    def __init__(self) -> None:
        self.cmd_read, self.cmd_write = os.pipe()
        self.reply_read, self.reply_write = os.pipe()
        self._channel = Channel(self.reply_read, self.cmd_write)  # the parent's ends

    @property
    def child_fds(self) -> tuple[int, int]:
        return self.cmd_read, self.reply_write

    def job_fields(self) -> dict[str, int]:
        return {"read_fd": self.cmd_read, "write_fd": self.reply_write}

    def started(self) -> None:
        """The child has its copies: close the parent's copies of the child's ends (EOF when it dies)."""
        _close(self.cmd_read)
        _close(self.reply_write)
        self.cmd_read = self.reply_write = -1  # never closed twice: the number may belong to another file by then

    def send(self, text: str) -> bool:
        try:
            self._channel.send(text)
            return True
        except OSError:  # the child is gone or closed its end
            return False

    def receive(self, deadline: float) -> str:
        """One line, or "" on EOF, on a line longer than Channel.MAX_LINE, or at `deadline` (perf_counter)."""
        return self._channel.receive(deadline)

    def close(self) -> None:
        for fd in (self.cmd_read, self.cmd_write, self.reply_read, self.reply_write):
            _close(fd)
        self.cmd_read = self.cmd_write = self.reply_read = self.reply_write = -1


def _close(fd: int) -> None:
    if fd < 0:
        return
    try:
        os.close(fd)
    except OSError:
        pass


def ready_ms(line: str) -> float | None:
    """The per-call milliseconds of a `ready` line, None for anything else."""
    parts = line.split()
    if len(parts) != 2 or parts[0] != "ready":
        return None
    try:
        value = float(parts[1])
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


@dataclass(frozen=True)
class Plan:
    rounds: int
    trials_per_block: int


def plan(trials: int, rounds: int, budget_s: float, ref_call_ms: float, cand_call_ms: float,
         floor: int = MIN_TRIALS) -> Plan:
    """Rounds and block size: `trials` per side in `rounds` blocks, fewer when a side's calls are slow enough
    that the trials would pass `budget_s` (each side's budget, as in `timing.measure`); at least 5 rounds of 1,
    and never fewer than `min(floor, trials)` trials per side: the candidate's own warm-up time (its `ready`
    line) sets `cand_call_ms`, so a slow warm-up must not buy a short timing."""
    per_call_s = max(ref_call_ms, cand_call_ms, 1e-4) / 1e3
    rounds = max(1, min(rounds, trials))
    if rounds * per_call_s > budget_s:
        rounds = max(min(5, trials), int(budget_s / per_call_s))
    per_block = max(1, min(math.ceil(trials / rounds), int(budget_s / (rounds * per_call_s))))
    per_block = max(per_block, math.ceil(min(floor, trials) / rounds))
    return Plan(rounds, per_block)


@dataclass(frozen=True)
class Pairing:
    """What the parent saw of one paired timing."""

    rounds_done: int
    candidate_block_wall_s: tuple[float, ...]
    """Each candidate block from `T n` sent to `done` read, by the parent's clock."""
    stopped: str = ""
    """Why the pairing ended early ("" when every round ran)."""
    reference_block_wall_s: tuple[float, ...] = ()
    """Each reference block, likewise (the candidate frozen before the clock starts)."""
    candidate_block_runnable_s: tuple[float, ...] = ()
    """Time the busiest thread of the candidate's sandbox spent running or ready to run in each block, as the
    kernel accounts it (`busiest_thread_s`); empty when it could not be read."""
    reference_block_runnable_s: tuple[float, ...] = ()
    """The same for the reference's blocks."""
    candidate_block_cpu_s: tuple[float, ...] = ()
    """CPU time of every task in the candidate's cgroup in each of its blocks (`RunningChild.cpu_ns`), whatever
    process, session or clone flags did the work; empty without a cgroup."""
    reference_block_cpu_s: tuple[float, ...] = ()
    """The same for the reference's blocks."""
    candidate_block_thread_cpu_s: tuple[float, ...] = ()
    """CPU time of the busiest single thread of the candidate's sandbox in each of its blocks (schedstat run
    time, no run-queue wait); empty when unreadable."""
    reference_block_thread_cpu_s: tuple[float, ...] = ()
    """The same for the reference's blocks."""
    block_checks: tuple[int, ...] = ()
    """Hidden check calls asked of each round's blocks (the same of both children, `draw_checks`)."""
    candidate_block_spans_ns: tuple[tuple[int, int], ...] = ()
    """Each candidate block's (start, end) on CLOCK_MONOTONIC, by the parent's clock: where its timed calls and
    the checks among them lie, so the check of which code ran judges them by themselves (`code_check`)."""


FROZEN_FAILED = "the candidate's sandbox could not be frozen (for the reference's block, or to read its own)"


def draw_checks(rounds: int, trials: int, pool: int) -> list[int]:
    """Hidden check calls for each round's blocks: Binomial(`trials`, e / `trials`) each, with e the checks
    expected per block (the `pool` of drawn checks, `children.timing_checks`, over `protocol.CHECK_POOL_FACTOR`
    and the rounds: one at the defaults), as if each trial were preceded by one independently; from the OS's
    entropy, never more in all than the pool."""
    counts: list[int] = []
    left = pool
    rate = pool / protocol.CHECK_POOL_FACTOR / max(1, rounds) / max(1, trials)
    for _ in range(rounds):
        c = min(left, binomial(trials, rate))
        counts.append(c)
        left -= c
    return counts


def run_rounds(ref: Pipes, ref_child: sandbox.RunningChild, cand: Pipes, cand_child: sandbox.RunningChild,
               p: Plan, pool: int = 0) -> Pairing:
    """Alternate blocks between the two ready children (reference first in even rounds). Each round's two
    blocks get the same count of hidden check calls (`draw_checks` over a `pool` of them): the reference
    computes the checks' outputs in its blocks as the candidate does, so their untimed work stays alike."""
    checks = draw_checks(p.rounds, p.trials_per_block, pool)
    walls: list[float] = []
    ref_walls: list[float] = []
    cand_run: list[float | None] = []
    ref_run: list[float | None] = []
    cand_cpu: list[tuple | None] = []
    ref_cpu: list[tuple | None] = []
    spans: list[tuple[int, int]] = []
    for r in range(p.rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            if side == 0:
                if not cand_child.freeze():  # a tree the kernel cannot stop would run beside the reference
                    cand_child.thaw()
                    return Pairing(r, tuple(walls), FROZEN_FAILED, tuple(ref_walls))
                ok, wall, run, cpu, _ = _block(ref, ref_child, p.trials_per_block, checks[r], exact=True)
                ref_walls.append(wall)
                ref_run.append(run)
                ref_cpu.append(cpu)
                cand_child.thaw()
                if not ok:
                    return Pairing(r, tuple(walls), REFERENCE_STOPPED, tuple(ref_walls))
            else:
                ok, wall, run, cpu, span = _block(cand, cand_child, p.trials_per_block, checks[r], exact=True)
                spans.append(span)
                if cpu is FROZEN_FAILED:
                    return Pairing(r, tuple(walls), FROZEN_FAILED, tuple(ref_walls))
                if not ok:
                    return Pairing(r, tuple(walls), "the candidate stopped answering", tuple(ref_walls))
                walls.append(wall)
                cand_run.append(run)
                cand_cpu.append(cpu)
    return Pairing(p.rounds, tuple(walls), reference_block_wall_s=tuple(ref_walls), block_checks=tuple(checks),
                   candidate_block_runnable_s=_known(cand_run), reference_block_runnable_s=_known(ref_run),
                   candidate_block_cpu_s=_known([None if c is None else c[0] for c in cand_cpu]),
                   reference_block_cpu_s=_known([None if c is None else c[0] for c in ref_cpu]),
                   candidate_block_thread_cpu_s=_known([None if c is None else c[1] for c in cand_cpu]),
                   reference_block_thread_cpu_s=_known([None if c is None else c[1] for c in ref_cpu]),
                   candidate_block_spans_ns=tuple(spans))


def _block(pipes: Pipes, child: sandbox.RunningChild, trials: int, checks: int = 0,
           exact: bool = False) -> tuple[bool, float, float | None, tuple | str | None, tuple[int, int]]:
    """One block of `trials` (with `checks` check calls expected among them) on one side: answered, its wall
    time by the parent's clock, the busiest thread's runnable seconds, (CPU seconds of the child's whole
    cgroup, of its busiest thread) or None (FROZEN_FAILED: `exact` and the tree would not freeze), and its
    (start, end) in CLOCK_MONOTONIC ns.

    `exact`: each reading is taken with the child's tree frozen. Why: the kernel adds a running task's time
    to its counters (the cgroup's, /proc/<tid>/schedstat) only at a tick (every 4 ms at 250 Hz) or a switch,
    and a block lasts about a millisecond, so a helper process that never sleeps showed no CPU time in about
    three blocks of four and `parallel_work`'s median block saw nothing beside the timed thread
    (`tests/adversarial/process_busy_throughout.py`: `correct` 3 of 4). Freezing switches every task out,
    which brings its time up to date; the freeze is outside the block's wall time. Both sides are read so:
    the readings then cover the same stretch of each child's work after `done` (the freeze lands while it
    starts sending the block's check calls), and `unaccounted` compares like with like."""
    s0, cpu0 = _reading(child, exact)
    if s0 is FROZEN_FAILED:
        return False, 0.0, None, FROZEN_FAILED, (0, 0)
    start_ns = time.monotonic_ns()
    t0 = time.perf_counter()
    ok = pipes.send(f"T {trials} {checks}") and pipes.receive(child.deadline) == DONE
    wall = time.perf_counter() - t0
    span = (start_ns, time.monotonic_ns())
    s1, cpu1 = _reading(child, exact)
    if s1 is FROZEN_FAILED:
        return False, wall, None, FROZEN_FAILED, span
    # the block's check calls are reported after it, once the readings are taken (`SEND`): a child that began
    # reporting at `done` had part of that work counted in the block, more for the candidate (its report pipe is
    # the one the parent reads and decodes): 30-120 ms more per check of a slow kernel, and an honest one was
    # rejected `timing_inconsistent` (affine/28's `columns` answer, the cpu-tiny preset, 1 in 8). The next
    # block starts only once they are out, so the reports never overlap a measured block.
    ok = ok and pipes.send(SEND) and pipes.receive(child.deadline) == SENT
    runnable = busiest_thread_s(thread_times(s0, None), thread_times(s1, None))
    thread_cpu = busiest_thread_s(thread_times(s0, 0), thread_times(s1, 0))
    cpu = None
    if cpu0 is not None and cpu1 is not None and thread_cpu is not None:
        cpu = (max((cpu1 - cpu0) / 1e9, tasks_cpu_s(thread_times(s0, 0), thread_times(s1, 0))), thread_cpu)
    return ok, wall, runnable, cpu, span


def _reading(child: sandbox.RunningChild, exact: bool) -> tuple:
    """(schedstats, cgroup CPU ns) of the child; `exact` (with a cgroup freezer): read frozen, then thawed."""
    if not (exact and child.cgroup is not None and cgroups.FREEZE in child.cgroup.held):  # SIGSTOP scans: no
        return schedstats(child), child.cpu_ns()
    if not child.freeze():
        child.thaw()
        return FROZEN_FAILED, None
    try:
        return schedstats(child), child.cpu_ns()
    finally:
        child.thaw()


def _known(values: list[float | None]) -> tuple[float, ...]:
    return () if any(v is None for v in values) else tuple(v for v in values if v is not None)
