#!/usr/bin/env python3
"""False rejections under load: evaluate honest CPU reference solutions while the machine is oversubscribed.

Every timing check that can reject (paired timing's `timing_inconsistent`: the parent's upper bound and the
unaccounted-time rule; the hidden check calls; the run timeout) must leave honest kernels `correct` when the
machine is busy (training evaluates while it generates). This script keeps `--load` x nproc busy-loop
processes running (2x by default: every core has two runnable processes besides the harness's), evaluates
the reference solutions in kernelbench/tasks/solutions/cpu round-robin `--n` times through the real harness, prints
the count of non-correct results by status and flag, and exits 1 when there is any.

Launch:
    python3 scripts/false_rejections.py                  # 200 evaluations, 2x oversubscribed
    python3 scripts/false_rejections.py --n 40 --jobs 2  # a quicker check, two evaluations at a time
    python3 scripts/false_rejections.py --only L1/01_relu --n 20
Builds are made (and cached) before the load starts: compiling is not what is measured.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbench.tasks.builtin import load_builtin  # noqa: E402
from kernelbench.harness.config import EvalConfig  # noqa: E402
from kernelbench.harness.evaluate import INFORMATIONAL_FLAGS, RETIMED, compile_stage, run_stage  # noqa: E402
from kernelbench.tasks.solutions import SCALED_INPUTS_UNRELIABLE, list_solutions  # noqa: E402

BUSY_LOOP = "while True:\n    pass\n"


def start_load(processes: int) -> list[subprocess.Popen]:
    """`processes` single-threaded busy loops at normal priority, in their own sessions."""
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(processes)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait()


def rss_mib() -> float:
    """This process's resident set (the harness parent's: it holds every output it compares), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def config_for(task_id: str, args: argparse.Namespace) -> EvalConfig:
    # as scripts/check_solutions.py: some fp32 references are themselves out of tolerance on other distributions
    extra = 0 if task_id in SCALED_INPUTS_UNRELIABLE else EvalConfig().extra_distribution_trials
    fields = dict(device="cpu", size="cpu", extra_distribution_trials=extra)
    if args.timing_trials:
        fields["timing_trials"] = args.timing_trials
    return EvalConfig(**fields)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200, help="evaluations in all (default 200)")
    ap.add_argument("--load", type=float, default=2.0, help="busy-loop processes per core (default 2)")
    ap.add_argument("--jobs", type=int, default=1, help="evaluations at once (default 1)")
    ap.add_argument("--only", default="", help="solutions whose task id contains this")
    ap.add_argument("--timing-trials", type=int, default=0, help="override EvalConfig.timing_trials")
    ap.add_argument("--json", default="", help="write every result row here, one JSON object per line as it comes")
    args = ap.parse_args(argv)

    tasks = {t.id: t for t in load_builtin()}
    solutions = [s for s in list_solutions("cpu") if args.only in s.task_id and s.task_id in tasks]
    if not solutions:
        print("no solution matches", file=sys.stderr)
        return 2
    print(f"building {len(solutions)} solutions (cached after the first run)...", flush=True)
    staged = {}
    for s in solutions:
        st = compile_stage(tasks[s.task_id], s.source, config_for(s.task_id, args))
        if st.decided is not None:
            print(f"  {s.task_id}: {st.decided.status} before the run stage; left out", flush=True)
            continue
        staged[s.task_id] = st
    order = [tid for tid in (s.task_id for s in solutions) if tid in staged]
    if not order:
        print("no solution compiled", file=sys.stderr)
        return 2
    plan = [order[i % len(order)] for i in range(args.n)]

    cores = os.cpu_count() or 1
    load = start_load(max(0, round(args.load * cores)))
    print(f"load: {len(load)} busy loops on {cores} cores; {args.n} evaluations, {args.jobs} at a time", flush=True)
    rows: list[dict] = []
    counts: collections.Counter = collections.Counter()
    t0 = time.time()

    def one(i_tid: tuple[int, str]) -> dict:
        i, tid = i_tid
        r = run_stage(staged[tid])
        bad = [f for f in r.flags if f not in INFORMATIONAL_FLAGS]  # `retimed` is counted apart
        row = {"i": i, "task": tid, "status": r.status, "flags": list(r.flags), "speedup": round(r.speedup, 3),
               "rejected": r.status != "correct" or bool(bad), "parent_rss_mib": round(rss_mib())}
        if row["rejected"]:
            row["feedback"] = r.feedback[:600]
        return row

    sink = open(args.json, "w") if args.json else None  # rows as they come: a killed run keeps what it measured
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for row in pool.map(one, enumerate(plan)):
                rows.append(row)
                if sink:
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
                if row["rejected"]:
                    counts[f"status:{row['status']}"] += 1
                    for f in row["flags"]:
                        if f not in INFORMATIONAL_FLAGS:
                            counts[f"flag:{f}"] += 1
                    print(f"[{row['i'] + 1}/{args.n}] {row['task']}: {row['status']} {row['flags']}\n"
                          f"    {row['feedback'].strip().splitlines()[0] if row['feedback'].strip() else ''}", flush=True)
                else:
                    print(f"[{row['i'] + 1}/{args.n}] {row['task']}: correct, {row['speedup']}x; {time.time() - t0:.0f} s, "
                          f"{sum(r['rejected'] for r in rows)} rejected so far; parent RSS {row['parent_rss_mib']} MiB", flush=True)
    finally:
        stop_load(load)
        if sink:
            sink.close()
    rejected = sum(r["rejected"] for r in rows)
    print(f"\n{len(rows)} evaluations of {len(order)} reference solutions under {args.load:g}x load "
          f"in {time.time() - t0:.0f} s")
    for key, n in sorted(counts.items()):
        print(f"  {key}: {n}")
    print(f"retimed (correct after a second timing): {sum(RETIMED in r['flags'] for r in rows)}")
    print(f"rejections: {rejected}")
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
