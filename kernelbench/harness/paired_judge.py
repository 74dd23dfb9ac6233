"""Paired timing, parent side, the judging half: what the parent concludes from the blocks it timed and the
trial times the candidate reported (`overruns`, `unaccounted`, `unaccounted_wall`, `parallel_work`) and the
paired speedup. `paired` runs the rounds; its docstring says why and how.
"""

from __future__ import annotations

import statistics
from typing import Any


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
    """Seconds each of the first `n` blocks' trials account for: as many trials as were reported, each at the
    block's median, never more than their sum. Why the median: the speedup is read from block medians, and a
    reported list that kept its sum but moved the time into one trial (`[0.1, 0.1, 60]` for three 20 ms calls)
    accounted for the whole block while its median claimed 200x; what the trials account for is what the
    median they claim accounts for. An honest block's trials sit near their median, so little changes."""
    try:
        sums = [min(sum(float(t) for t in b), len(b) * statistics.median(float(t) for t in b)) / 1e3 if b else 0.0
                for b in blocks[:n]]  # type: ignore[index]
    except (TypeError, ValueError, statistics.StatisticsError):
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


def parallel_work(pairing: Any, threads: int) -> str:
    """Empty unless the candidate's other tasks did work beside its busiest thread in its blocks, more than
    `threads` threads (or the reference's own tasks) would (`pairing`: a `paired.Pairing`).

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
