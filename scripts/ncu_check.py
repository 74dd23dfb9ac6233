#!/usr/bin/env python3
"""One `--profile ncu` evaluation on CUDA: a correct CUDA solution judged with Nsight Compute's counters.

    python3 scripts/ncu_check.py                       # on a GPU machine with ncu (scripts/gpu_check.sh runs it)
    python3 scripts/ncu_check.py --dry-run             # anywhere: the command it would run, and what ncu it found

Runs `python3 -m cli.main eval --task TASK --candidate SOLUTION --device cuda --profile ncu --json`, prints the
profile tables, and exits 0 ("passed") when the result is correct and carries at least one ncu row with its
DRAM / SM throughput and occupancy in [0, 100]; 1 ("failed") otherwise, with the profile's `unavailable` note
(for example ERR_NVGPUCTRPERM when the driver keeps the GPU's counters for administrators).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="L1/01_relu")
    p.add_argument("--candidate", default=os.path.join(ROOT, "kernelbench", "tasks", "solutions", "cuda", "L1", "01_relu.py"))
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--dry-run", action="store_true", help="print the command and the ncu found, run nothing")
    args = p.parse_args()
    sys.path.insert(0, ROOT)
    from kernelbench.harness.insight import ncu

    cmd = [sys.executable, "-m", "cli.main", "eval", "--task", args.task, "--candidate", args.candidate,
           "--device", "cuda", "--profile", "ncu", "--trials", str(args.trials), "--json"]
    print("ncu:", ncu.find() or "not found", "| metrics:", ",".join(ncu.METRICS))
    print("command:", " ".join(cmd))
    if args.dry_run:
        return 0
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:])
        print(f"failed: eval exited {proc.returncode}")
        return 1
    r = json.loads(proc.stdout)
    prof = r.get("profile", {})
    print(json.dumps(prof, indent=1))
    print(r.get("feedback", ""))
    rows = prof.get("candidate", {}).get("ncu_rows", [])
    bounded = all(0 <= row[k] <= 100 for row in rows
                  for k in ("dram_throughput_pct", "sm_throughput_pct", "achieved_occupancy_pct"))
    if r.get("status") == "correct" and rows and bounded:
        print(f"passed: {len(rows)} kernel(s) with ncu counters")
        return 0
    print(f"failed: status {r.get('status')}, {len(rows)} ncu row(s); unavailable: {prof.get('unavailable', '')}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
