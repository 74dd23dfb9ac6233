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
waits for `done` (the block's readings end there) and `sent` (the block's check calls reported), then to the other (the order alternates between rounds); `E` ends it. The reference is
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
import statistics
import time
from dataclasses import dataclass

from kernelbench.harness import protocol, sandbox
from kernelbench.harness.sandbox_cpu import busiest_thread_s, sandbox_runnable_ns, schedstats, tasks_cpu_s, thread_times  # noqa: F401
from kernelbench.harness.child.timing import DONE, MIN_TRIALS, SENT, Channel, binomial

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


FROZEN_FAILED = "the candidate's sandbox could not be frozen for the reference's block"


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
    for r in range(p.rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            if side == 0:
                if not cand_child.freeze():  # a tree the kernel cannot stop would run beside the reference
                    cand_child.thaw()
                    return Pairing(r, tuple(walls), FROZEN_FAILED, tuple(ref_walls))
                ok, wall, run, cpu = _block(ref, ref_child, p.trials_per_block, checks[r])
                ref_walls.append(wall)
                ref_run.append(run)
                ref_cpu.append(cpu)
                cand_child.thaw()
                if not ok:
                    return Pairing(r, tuple(walls), REFERENCE_STOPPED, tuple(ref_walls))
            else:
                ok, wall, run, cpu = _block(cand, cand_child, p.trials_per_block, checks[r])
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
                   reference_block_thread_cpu_s=_known([None if c is None else c[1] for c in ref_cpu]))


def _block(pipes: Pipes, child: sandbox.RunningChild, trials: int,
           checks: int = 0) -> tuple[bool, float, float | None, tuple | None]:
    """One block of `trials` (with `checks` check calls expected among them) on one side: answered, its wall
    time by the parent's clock, the busiest thread's runnable seconds, and (CPU seconds of the child's whole
    cgroup, of its busiest thread) or None."""
    s0, cpu0 = schedstats(child), child.cpu_ns()
    t0 = time.perf_counter()
    ok = pipes.send(f"T {trials} {checks}") and pipes.receive(child.deadline) == DONE
    wall = time.perf_counter() - t0
    s1, cpu1 = schedstats(child), child.cpu_ns()
    # the block's check calls are reported after it, outside the readings (`timing.Measurement._check`); the
    # next block starts only once they are out, so the reports never overlap a measured block
    ok = ok and pipes.receive(child.deadline) == SENT
    runnable = busiest_thread_s(thread_times(s0, None), thread_times(s1, None))
    thread_cpu = busiest_thread_s(thread_times(s0, 0), thread_times(s1, 0))
    cpu = None
    if cpu0 is not None and cpu1 is not None and thread_cpu is not None:
        cpu = (max((cpu1 - cpu0) / 1e9, tasks_cpu_s(thread_times(s0, 0), thread_times(s1, 0))), thread_cpu)
    return ok, wall, runnable, cpu


def _known(values: list[float | None]) -> tuple[float, ...]:
    return () if any(v is None for v in values) else tuple(v for v in values if v is not None)


def block_medians(blocks: object, rounds: int) -> list[float] | None:
    """Per-block medians from a child's `timing_blocks` (lists of ms), None unless exactly `rounds` of them."""
    if not isinstance(blocks, list) or len(blocks) != rounds:
        return None
    try:
        return [statistics.median(float(t) for t in b) for b in blocks]
    except (TypeError, ValueError, statistics.StatisticsError):
        return None


def overruns(blocks: object, walls: tuple[float, ...]) -> str:
    """Empty when every candidate block's reported trial times fit inside the parent's wall time for it."""
    if not isinstance(blocks, list) or len(blocks) != len(walls):
        return f"reported {len(blocks) if isinstance(blocks, list) else 0} timing blocks, the parent ran {len(walls)}"
    for i, (b, wall) in enumerate(zip(blocks, walls)):
        try:
            total_s = sum(float(t) for t in b) / 1e3
        except (TypeError, ValueError):
            return f"block {i}: malformed trial times"
        if not total_s <= wall:  # NaN fails too
            return f"block {i}: trials sum to {total_s * 1e3:.3f} ms but the block took {wall * 1e3:.3f} ms"
    return ""


UNACCOUNTED_RATIO = 1.5
"""How much more of its blocks' runnable time a candidate's reported trials may leave unaccounted for than
the reference's trials leave of the reference's blocks (medians over blocks), plus UNACCOUNTED_SLACK."""
UNACCOUNTED_SLACK = (0.05, 0.002)
"""(fraction of the candidate's median block, seconds): noise allowance per block."""


def _sums_s(blocks: object, n: int) -> list[float] | None:
    try:
        sums = [sum(float(t) for t in b) / 1e3 for b in blocks[:n]]  # type: ignore[index]
    except (TypeError, ValueError):
        return None
    return sums if len(sums) == n else None


def _block_medians_s(blocks: object, n: int) -> list[float] | None:
    try:
        return [statistics.median(float(t) for t in b) / 1e3 if b else 0.0 for b in blocks[:n]]  # type: ignore[index]
    except (TypeError, ValueError, statistics.StatisticsError):
        return None


def unaccounted(ref_blocks: object, ref_runnable_s: tuple[float, ...], cand_blocks: object,
                cand_runnable_s: tuple[float, ...], checks: tuple[int, ...], ref_walls: tuple[float, ...] = (),
                cand_walls: tuple[float, ...] = ()) -> str:
    """Empty unless the candidate's reported trial times leave much more of its blocks unaccounted for than
    the reference's trials leave of the reference's blocks.

    Why: `overruns` catches a child that reports MORE time than it took; this catches one that reports LESS,
    the profitable lie (a candidate that rewrote the timing loop's list from inside `forward` reported
    20000x with correct outputs). Outside its timed calls a block does the same trusted work in both children
    (loading fresh inputs, the check call, reporting), so what the trials leave unaccounted for should match.
    The measure is each sandbox's RUNNABLE time in the block, as the kernel accounts it for its busiest thread
    (`busiest_thread_s`: on a CPU or waiting in a run queue for one), not the parent's wall clock: the wall clock also holds the
    parent's own delays in reading `done`, which a busy machine stretches on one side and not the other (the
    wall-clock form rejected an honest kernel at "1.852 ms of 6.968 ms" with the machine busy). An honest
    trial's wall time holds its own run-queue waits, so a candidate that reported only its CPU time is seen
    too. The check calls of each round's blocks (`checks`, the same count on both sides, `draw_checks`)
    count as that many median trials. Medians over blocks: a lie that moves the median of the round ratios has to be told in most blocks.
    What it cannot see: a lie smaller than the untimed work's noise (docs/harness.md). Without kernel
    readings (`cand_runnable_s` or `ref_runnable_s` empty) the parent's wall times are compared instead."""
    n = min(len(cand_runnable_s), len(ref_runnable_s))
    if not n:
        return unaccounted_wall(ref_blocks, ref_walls, cand_blocks, cand_walls)
    cand_sums, cand_meds = _sums_s(cand_blocks, n), _block_medians_s(cand_blocks, n)
    ref_sums, ref_meds = _sums_s(ref_blocks, n), _block_medians_s(ref_blocks, n)
    if cand_sums is None or cand_meds is None or ref_sums is None or ref_meds is None:
        return "malformed timing blocks"

    counts = list(checks)[:n] + [0] * max(0, n - len(checks))

    def gaps(runnable: tuple[float, ...], sums: list[float], meds: list[float]) -> list[float]:
        return [w - s - c * m for w, s, m, c in zip(runnable, sums, meds, counts)]

    cand_gap = statistics.median(gaps(cand_runnable_s, cand_sums, cand_meds))
    ref_gap = max(0.0, statistics.median(gaps(ref_runnable_s, ref_sums, ref_meds)))
    cand_block = statistics.median(cand_runnable_s[:n])
    frac, abs_s = UNACCOUNTED_SLACK
    if not cand_gap <= UNACCOUNTED_RATIO * ref_gap + frac * cand_block + abs_s:  # NaN fails too
        return (f"per block (median of {n}), its reported trials account for {1e3 * (cand_block - cand_gap):.3f} ms "
                f"of the {1e3 * cand_block:.3f} ms its sandbox was running or ready to run; the reference's leave "
                f"{1e3 * ref_gap:.3f} ms unaccounted for")
    return ""


def unaccounted_wall(ref_blocks: object, ref_walls: tuple[float, ...], cand_blocks: object,
                     cand_walls: tuple[float, ...]) -> str:
    """The wall-time form of `unaccounted` (no CPU readings): the time the candidate's trials leave unaccounted
    for in its blocks against the same for the reference's, medians over blocks."""
    n = min(len(ref_walls), len(cand_walls))
    ref_sums, cand_sums = _sums_s(ref_blocks, n), _sums_s(cand_blocks, n)
    if ref_sums is None or cand_sums is None:
        return "malformed timing blocks"
    if n == 0:
        return ""
    ref_gap = statistics.median(max(0.0, w - s) for w, s in zip(ref_walls, ref_sums))
    cand_gap = statistics.median(w - s for w, s in zip(cand_walls, cand_sums))
    cand_wall = statistics.median(cand_walls[:n])
    frac, abs_s = UNACCOUNTED_SLACK
    if not cand_gap <= UNACCOUNTED_RATIO * ref_gap + frac * cand_wall + abs_s:  # NaN fails too
        return (f"per block (median of {n}), its trials account for {1e3 * (cand_wall - cand_gap):.3f} ms of the "
                f"{1e3 * cand_wall:.3f} ms the block took; the reference's leave {1e3 * ref_gap:.3f} ms unaccounted for")
    return ""


PARALLEL_SLACK = 0.3
"""CPU time a candidate's other tasks may use in a block beyond what the rule allows, as a fraction of its
busiest thread's: the noise of the accounting (a running task's time is updated at scheduler ticks) and of
the child's own short-lived work; less than a helper worth having."""


def parallel_work(pairing: Pairing, threads: int) -> str:
    """Empty unless the candidate's other tasks did work beside its busiest thread in its blocks, more than
    `threads` threads (or the reference's own tasks) would.

    Why: the thread checks (`child.spawn_guard`) stop new threads and processes once the timed calls begin,
    but a process started at import or in `__init__` (allowed then: load_inline runs ninja) and left running,
    in another session or made by clone() without CLONE_THREAD, can do a share of each call's work beside the
    timed thread: the candidate gets two cores where the reference gets `threads`. `unaccounted` reads the
    busiest single thread, so a helper less busy than it was never charged (judged correct before). The
    cgroup holds every task the child made, so its CPU time over a block less the busiest thread's is the
    work done beside that thread, measured against the busiest thread's own CPU time: a ratio that does not
    depend on how loaded the machine is (under load both get less CPU, in the same proportion).
    Covers: any helper whose work overlaps the candidate's blocks, whatever it is called or how it was made.
    Not covered: a helper's work outside the blocks (frozen in the reference's; between rounds there is
    nothing to gain: the timing inputs are fresh per call) or below PARALLEL_SLACK; without a cgroup
    (`allow_missing_cgroups`) nothing is read. Medians over blocks, as for the speedup itself."""
    cand = _beside(pairing.candidate_block_cpu_s, pairing.candidate_block_thread_cpu_s)
    if cand is None:
        return ""
    ref = _beside(pairing.reference_block_cpu_s, pairing.reference_block_thread_cpu_s) or 0.0
    allowed = max(threads - 1.0, ref) + PARALLEL_SLACK
    if not cand <= allowed:  # NaN fails too
        n = min(len(pairing.candidate_block_cpu_s), len(pairing.candidate_block_thread_cpu_s))
        return (f"per block (median of {n}), its other tasks used {cand:.2f}x the CPU time of its busiest thread; "
                f"{threads} thread(s) allow {max(threads - 1.0, 0.0):.2f}x and the reference's used {ref:.2f}x "
                f"(work beside the timed calls, e.g. in a process started at import or in __init__)")
    return ""


def _beside(total_s: tuple[float, ...], thread_s: tuple[float, ...]) -> float | None:
    """Median over blocks of (CPU time of all tasks - the busiest thread's) / the busiest thread's; None without
    readings."""
    ratios = [(t - b) / b for t, b in zip(total_s, thread_s) if b > 0]
    return statistics.median(ratios) if ratios else None


def paired_speedup(ref_medians: list[float], cand_medians: list[float]) -> float:
    """Median over rounds of reference-block median / candidate-block median."""
    ratios = [r / c for r, c in zip(ref_medians, cand_medians) if r > 0 and c > 0]
    return statistics.median(ratios) if ratios else 0.0
