"""Paired timing, parent side: the reference child and the candidate child timed in alternating blocks.

Why: on a shared CPU machine the memory bandwidth one process gets drifts by tens of percent within a
second (measured on a 2-core VM: block medians of one 8 MB ReLU moved 0.4 -> 1.0 ms from one 25 ms block
to the next, in one process). A speedup taken as the ratio of two medians measured seconds apart, in two
processes, carries that drift: its coefficient of variation over repeated evaluations was 18-29 % for a
memory-bound kernel. Timing the two in alternating short blocks and taking the median of the per-round
ratios cancels every drift slower than a round: with `scripts/bench_harness.py` on the same VM the CV fell
to 4-11 % for that kernel and 1-3 % for a compute-bound one (docs/harness.md, "Measured").

Protocol (one line per message over two pipes per child, `kernelbench.timing.serve_blocks` is the child
side): each child warms up and says `ready <ms per call>`; per round the parent sends `T n` to one child,
waits for `done`, then to the other (the order alternates between rounds); `E` ends it. The reference is
trusted; the candidate's answers are not: a wrong or missing answer ends the pairing (the candidate's
verdict then comes from its exit), and the parent times every block itself, so the trial times the
candidate reports later must fit inside its blocks (`overruns`) and leave no more of them unaccounted for
than the reference's trials leave of its own (`unaccounted`); otherwise `timing_inconsistent`. While the reference times a block the
candidate's whole sandbox is frozen (SIGSTOP, `sandbox.RunningChild.freeze`), so nothing it left running
can slow the reference down.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass

from kernelbench import sandbox
from kernelbench.timing import Channel

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


def plan(trials: int, rounds: int, budget_s: float, ref_call_ms: float, cand_call_ms: float) -> Plan:
    """Rounds and block size: `trials` per side in `rounds` blocks, fewer when a side's calls are slow enough
    that the trials would pass `budget_s` (each side's budget, as in `timing.measure`); at least 5 rounds of 1."""
    per_call_s = max(ref_call_ms, cand_call_ms, 1e-4) / 1e3
    rounds = max(1, min(rounds, trials))
    if rounds * per_call_s > budget_s:
        rounds = max(min(5, trials), int(budget_s / per_call_s))
    per_block = max(1, min(math.ceil(trials / rounds), int(budget_s / (rounds * per_call_s))))
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


def run_rounds(ref: Pipes, ref_child: sandbox.RunningChild, cand: Pipes, cand_child: sandbox.RunningChild,
               p: Plan) -> Pairing:
    """Alternate blocks between the two ready children (reference first in even rounds)."""
    walls: list[float] = []
    ref_walls: list[float] = []
    for r in range(p.rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            if side == 0:
                cand_child.freeze()
                t0 = time.perf_counter()
                ok = ref.send(f"T {p.trials_per_block}") and ref.receive(ref_child.deadline) == "done"
                ref_walls.append(time.perf_counter() - t0)
                cand_child.thaw()
                if not ok:
                    return Pairing(r, tuple(walls), REFERENCE_STOPPED, tuple(ref_walls))
            else:
                t0 = time.perf_counter()
                ok = cand.send(f"T {p.trials_per_block}") and cand.receive(cand_child.deadline) == "done"
                if not ok:
                    return Pairing(r, tuple(walls), "the candidate stopped answering", tuple(ref_walls))
                walls.append(time.perf_counter() - t0)
    return Pairing(p.rounds, tuple(walls), reference_block_wall_s=tuple(ref_walls))


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
"""How much more of a block's wall time a candidate's reported trials may leave unaccounted for than the
reference's trials leave of its block (medians over blocks), plus UNACCOUNTED_SLACK."""
UNACCOUNTED_SLACK = (0.05, 0.001)
"""(fraction of the candidate's median block wall time, seconds): noise allowance per block."""


def unaccounted(ref_blocks: object, ref_walls: tuple[float, ...], cand_blocks: object,
                cand_walls: tuple[float, ...]) -> str:
    """Empty unless the candidate's reported trial times leave much more of its blocks unaccounted for than
    the reference's leave of theirs.

    Why: `overruns` catches a child that reports MORE time than it took; this catches one that reports LESS,
    the profitable lie (a candidate that rewrote the timing loop's list from inside `forward` reported
    20000x with correct outputs). Outside its timed calls each block does the same trusted work in both
    children (loading fresh inputs into the same shapes, the loop itself, the pipe), so the time the trials
    do not account for should match between the two; time a candidate hides from its trials shows up there.
    Medians over blocks: a scheduling hiccup lands in one block, while a lie that moves the median of the
    round ratios has to be told in most of them. What it cannot see: a lie smaller than the untimed work's
    noise, so a kernel much faster than loading its inputs can still shade its times (docs/harness.md)."""
    try:
        n = min(len(ref_walls), len(cand_walls))
        ref_sums = [sum(float(t) for t in b) / 1e3 for b in ref_blocks[:n]]  # type: ignore[index]
        cand_sums = [sum(float(t) for t in b) / 1e3 for b in cand_blocks[:n]]  # type: ignore[index]
    except (TypeError, ValueError):
        return "malformed timing blocks"
    if len(ref_sums) < n or len(cand_sums) < n:
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


def paired_speedup(ref_medians: list[float], cand_medians: list[float]) -> float:
    """Median over rounds of reference-block median / candidate-block median."""
    ratios = [r / c for r, c in zip(ref_medians, cand_medians) if r > 0 and c > 0]
    return statistics.median(ratios) if ratios else 0.0
