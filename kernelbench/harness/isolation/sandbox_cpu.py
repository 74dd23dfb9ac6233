"""CPU time of a sandbox's threads as the kernel accounts it (/proc/<tid>/schedstat), for paired timing's
checks (`kernelbench.harness.paired`): the busiest thread's runnable time (`unaccounted`) and CPU time
(`parallel_work`, against the child's whole cgroup). The candidate cannot forge any of it."""

from __future__ import annotations

import os

from kernelbench.harness.isolation import process_tree, sandbox


def sandbox_runnable_ns(child: sandbox.RunningChild) -> dict[tuple[int, int], int] | None:
    """Nanoseconds each thread of each process in `child`'s sandbox has spent on a CPU or waiting in a run
    queue for one (kernel accounting, /proc/<pid>/task/<tid>/schedstat: run time plus run-queue wait), keyed by
    (pid, tid); None when /proc does not say. Time asleep (waiting for a pipe) is not in it. The candidate
    cannot forge it."""
    stats = schedstats(child)
    return None if stats is None else {k: run + wait for k, (run, wait) in stats.items()}


def schedstats(child: sandbox.RunningChild) -> dict[tuple[int, int], tuple[int, int]] | None:
    """(run ns, run-queue wait ns) of each thread of `child`'s sandbox, keyed by (pid, tid) (pid 0: read by
    tid); None when /proc does not say. The threads are those of the child's cgroup where it has one (every
    task, none missed by a scan of a tree that keeps changing), else the sandbox's processes from /proc."""
    if child.cgroup is not None and child.cgroup.dirs:
        paths = {(0, tid): f"/proc/{tid}/schedstat" for tid in child.cgroup.tids()}
    else:
        paths = {}
        for pid in process_tree.sandbox_pids(child.proc.pid, child.uid):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            paths.update({(pid, int(tid)): f"/proc/{pid}/task/{tid}/schedstat" for tid in tids})
    times: dict[tuple[int, int], tuple[int, int]] = {}
    for key, path in paths.items():
        try:
            with open(path, "rb") as f:
                fields = f.read().split()
            times[key] = (int(fields[0]), int(fields[1]))
        except (OSError, ValueError, IndexError):
            continue
    return times or None


def busiest_thread_s(before: dict[tuple[int, int], int] | None,
                     after: dict[tuple[int, int], int] | None) -> float | None:
    """Seconds the busiest single thread of the sandbox was running or ready to run between two readings.
    The busiest thread, not the sum: an honest OpenMP kernel's team threads spin-wait between parallel regions
    (libomp's block time), so their sum counts one block several times over and made an honest kernel look as
    if its trials left most of the block unaccounted for; one thread's time is bounded by the wall clock, and
    work handed to other threads still shows in the thread that did it."""
    if before is None or after is None:
        return None
    return max((ns - before.get(key, 0) for key, ns in after.items()), default=0) / 1e9


def thread_times(stats: dict[tuple[int, int], tuple[int, int]] | None, which: int | None) -> dict[tuple[int, int], int] | None:
    """Run time (`which` 0) or run time plus run-queue wait (None) of each thread of a `schedstats` reading."""
    if stats is None:
        return None
    return {k: run if which == 0 else run + wait for k, (run, wait) in stats.items()}


def tasks_cpu_s(before: dict[tuple[int, int], int] | None, after: dict[tuple[int, int], int] | None) -> float:
    """CPU seconds of every task of a `schedstats` reading between two readings (a task first seen in `after`
    from zero: it started in between).

    Why beside the cgroup's own counter: the counter holds what tasks that ended in the block used, the sum
    what the tasks alive at both readings used; the larger of the two is taken. Both are brought up to date
    for a task only at a scheduler tick (4 ms at 250 Hz) or switch, /proc/<tid>/schedstat included (measured:
    a busy loop's advanced every 4.0 ms): paired timing reads them with the tree frozen (`paired._reading`)."""
    if before is None or after is None:
        return 0.0
    return sum(max(0, ns - before.get(key, 0)) for key, ns in after.items()) / 1e9

