"""Derives (or re-times) CPU sizes for a KernelBench checkout's problems and prints how many are in range.

    python3 scripts/kernelbench_cpu_sizes.py /path/to/KernelBench                 # derive what is missing
    python3 scripts/kernelbench_cpu_sizes.py /path/to/KernelBench --levels 1 2   # one chunk; others in parallel
    python3 scripts/kernelbench_cpu_sizes.py /path/to/KernelBench --only L1/19_ReLU --rederive
    python3 scripts/kernelbench_cpu_sizes.py /path/to/KernelBench --recheck       # re-time the recorded sizes
    python3 scripts/kernelbench_cpu_sizes.py /path/to/KernelBench --report        # print the count only

A CPU size is new values for a problem's module-level size constants (kernelbench/tasks/size_plan.py) at which
its reference forward takes 1-20 ms on one thread, aiming at 5 ms; each problem is searched in a
sandboxed child with memory and CPU-time limits (kernelbench/sizes/size_probe.py), never at its GPU size. Results
go to kernelbench/tasks/kernelbench_cpu_sizes.json (or --records) as each batch ends, merged under a lock, so a
stopped run resumes where it was and several runs over different `--levels`/`--only` can share the file.
A problem whose text changed since its record is re-derived. Times are thread CPU time (a loaded machine
inflates wall time, not this); re-time borderline ones with `--recheck --only ...` on a quiet machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from kernelbench.tasks import cpu_size_records  # noqa: E402
from kernelbench.tasks.cpu_size_records import RANGE_MS, CpuSizeRecord, record_key, source_sha  # noqa: E402
from kernelbench.tasks.kernelbench_repo import load_kernelbench_repo  # noqa: E402
from kernelbench.sizes.size_derivation import DeriveConfig, derive, to_derive  # noqa: E402


def select(path: str, levels: list[int], only: list[str]) -> list:
    tasks = [t for t in load_kernelbench_repo(path) if t.level in levels]
    if only:
        tasks = [t for t in tasks if any(o == t.id.removeprefix("kb:") or o in t.id for o in only)]
    return tasks


def summary(tasks: list, records: dict[str, CpuSizeRecord], slowest: int) -> int:
    """Print the count in range and the slowest; returns the count."""
    rows = [(t, records.get(record_key(t))) for t in tasks]
    current = [(t, r) for t, r in rows if r is not None and r.source_sha256 == source_sha(t.source)]
    good = [r for _, r in current if r.in_range]
    lo, hi = RANGE_MS
    print(f"\n{len(good)}/{len(tasks)} problems have a CPU size whose reference runs in {lo:g}-{hi:g} ms on one thread"
          f" ({len(tasks) - len(current)} without a current record)")
    by_status: dict[str, int] = {}
    for _, r in current:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    print("by status: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
    timed = sorted((r for _, r in current if r.overrides is not None), key=lambda r: -r.cpu_ms)
    print("slowest: " + ", ".join(f"{r.task_id} {r.cpu_ms:.1f} ms" for r in timed[:slowest]))
    print("slowest in range: " + ", ".join(f"{r.task_id} {r.cpu_ms:.1f} ms" for r in [r for r in timed if r.in_range][:slowest]))
    levels = sorted({t.level for t in tasks})
    print("in range by level: " + ", ".join(
        f"L{lvl} {sum(r.in_range for t, r in current if t.level == lvl)}/{sum(t.level == lvl for t in tasks)}"
        for lvl in levels))
    fast = sorted((r for _, r in current if r.overrides is not None), key=lambda r: r.cpu_ms)
    print("fastest: " + ", ".join(f"{r.task_id} {r.cpu_ms:.2f} ms" for r in fast[:3]))
    for _, r in current:
        if not r.in_range:
            print(f"  {r.task_id}: {r.status}: {r.describe()}")
    return len(good)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="KernelBench checkout (its root or its KernelBench/ folder)")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3], choices=(1, 2, 3))
    parser.add_argument("--only", nargs="*", default=[], help="ids (L1/19_ReLU) or substrings of ids")
    parser.add_argument("--records", default="", help="records file (default kernelbench/tasks/kernelbench_cpu_sizes.json)")
    parser.add_argument("--rederive", action="store_true", help="derive again even where a current record exists")
    parser.add_argument("--recheck", action="store_true", help="re-time the recorded sizes instead of deriving")
    parser.add_argument("--report", action="store_true", help="derive nothing; print the count from the records")
    parser.add_argument("--batch", type=int, default=10, help="problems per sandboxed server (results saved after each)")
    parser.add_argument("--task-timeout", type=float, default=DeriveConfig.task_timeout_s, help="seconds per problem")
    parser.add_argument("--slowest", type=int, default=10, help="how many of the slowest to list")
    parser.add_argument("--task-cpu", type=int, default=DeriveConfig.cpu_s, help="CPU seconds per problem")
    parser.add_argument("--memory-mb", type=int, default=DeriveConfig.memory_mb, help="memory per problem")
    args = parser.parse_args(argv)

    records_file = Path(args.records or cpu_size_records.records_path())
    tasks = select(args.path, args.levels, args.only)
    records = cpu_size_records.load_records(records_file)
    if args.recheck:
        todo = [t for t in tasks if (r := records.get(record_key(t))) is not None and r.overrides is not None
                and r.source_sha256 == source_sha(t.source)]
    elif args.report:
        todo = []
    else:
        todo, messages = to_derive(tasks, records, args.rederive)
        for line in messages:
            print(line)
    config = DeriveConfig(task_timeout_s=args.task_timeout, cpu_s=args.task_cpu, memory_mb=args.memory_mb)
    start = time.monotonic()
    for i in range(0, len(todo), args.batch):
        chunk = todo[i:i + args.batch]
        new = derive(chunk, config, recorded=records if args.recheck else None)
        for key, r in list(new.items()):  # a re-derivation that does worse (a timeout on a busy machine) keeps the old
            old = records.get(key)
            if not args.recheck and old is not None and not r.in_range and old.source_sha256 == r.source_sha256 \
                    and old.overrides is not None and (old.in_range or r.overrides is None or old.cpu_ms < r.cpu_ms):
                print(f"{key}: the new derivation is out of range ({r.status}: {r.reason}); keeping the recorded size")
                del new[key]
        records = cpu_size_records.update_records(new, records_file)
        for key, r in new.items():
            print(f"{key:70} {r.status:10} {r.cpu_ms:8.2f} ms  {r.describe()[:110]}", flush=True)
        print(f"[{i + len(chunk)}/{len(todo)} in {time.monotonic() - start:.0f} s]", flush=True)
    summary(tasks, records, args.slowest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
