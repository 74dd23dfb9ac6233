#!/usr/bin/env python3
"""Check the hand-written reference solutions through the harness: correctness and speed against eager PyTorch,
or an nvcc compile.

Launch:
    python3 scripts/check_solutions.py --device cpu --size cpu             # every C++ solution (cpu and cpu_slow)
    python3 scripts/check_solutions.py --device cpu --only L1/19_softmax    # one task (substring of the id)
    python3 scripts/check_solutions.py --device cuda --compile-only         # nvcc check of every CUDA solution
    python3 scripts/check_solutions.py --device cuda --size gpu             # on a GPU machine
    python3 scripts/check_solutions.py --triton --device cpu                # Triton ones, interpreted (correctness)
    python3 scripts/check_solutions.py --triton --device cuda --size gpu    # Triton ones compiled, on a GPU

Each solution is judged by `kernelbench.harness.evaluate.evaluate` with every check it applies (sandboxed
child, the harness's timer), without the scaled-input trials for kernelbench.tasks.solutions.SCALED_INPUTS_UNRELIABLE,
whose fp32 reference is itself out of tolerance there. The compile-only check is
`kernelbench.harness.build.nvcc_check.nvcc_compile_check` (sandboxed nvcc, torch's headers; see DESIGN.md, "Devices").
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbench.harness.build.nvcc_check import nvcc_compile_check  # noqa: E402
from kernelbench.harness.config import EvalConfig  # noqa: E402
from kernelbench.harness.evaluate import evaluate  # noqa: E402
from kernelbench.tasks.builtin import load_builtin  # noqa: E402
from kernelbench.tasks.solutions import SCALED_INPUTS_UNRELIABLE, Solution, list_solutions  # noqa: E402


def run_harness(solution: Solution, size: str, device: str, build_dir: str) -> dict:
    task = next(t for t in load_builtin() if t.id == solution.task_id)
    extra = 0 if solution.task_id in SCALED_INPUTS_UNRELIABLE else EvalConfig().extra_distribution_trials
    config = EvalConfig(device=device, size=size, build_cache_dir=build_dir, extra_distribution_trials=extra)
    result = evaluate(task, solution.source, config)
    row = {"status": result.status, "ref_ms": result.ref_runtime_ms, "new_ms": result.runtime_ms}
    if "interpreted" in result.flags:  # Triton on CPU: correctness only, no time worth showing
        row.update(ref_ms=0.0, new_ms=0.0, detail=f"interpreted, run stage {result.run_s:.0f}s")
    if result.status != "correct":
        row["detail"] = result.feedback
    return row


def nvcc_check(solution: Solution) -> dict:
    """Compile the solution's cuda_sources with nvcc (sm_90, torch's headers), as load_inline would."""
    outcome = nvcc_compile_check(solution.source)
    return {"status": "compiled" if outcome.ok else "compile_error", "compile_s": outcome.wall_s,
            "detail": "" if outcome.ok else outcome.log[-300:]}


# ---------------------------------------------------------------- table

def print_table(rows: list[tuple[Solution, dict]]) -> None:
    print(f"{'task':34s} {'kind':8s} {'status':14s} {'ms ref':>9s} {'ms new':>9s} {'speedup':>8s}  detail")
    for sol, row in rows:
        ref, new = row.get("ref_ms", 0.0), row.get("new_ms", 0.0)
        speed = f"{ref / new:7.2f}x" if new else ""
        extra = row.get("detail", "") or (f"compile {row['compile_s']:.0f}s" if "compile_s" in row else "")
        print(f"{sol.task_id:34s} {sol.kind:8s} {row['status']:14s} {ref:9.3f} {new:9.3f} {speed:>8s}  {extra}")
    good = sum(row["status"] in ("correct", "compiled") for _, row in rows)
    print(f"{good}/{len(rows)} ok")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--size", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--only", default="", help="substring of the task id (or kind/id) to select")
    parser.add_argument("--compile-only", action="store_true", help="CUDA: nvcc compile check, no GPU needed")
    parser.add_argument("--jobs", type=int, default=2, help="parallel nvcc compiles")
    parser.add_argument("--build-dir", default=os.path.join(tempfile.gettempdir(), "kernel-agent-solution-builds"))
    parser.add_argument("--triton", action="store_true",
                        help="the Triton solutions (interpreted on --device cpu: correctness only; compiled on cuda)")
    args = parser.parse_args(argv)
    kinds = ("triton",) if args.triton else ("cuda",) if args.device == "cuda" else ("cpu", "cpu_slow")
    if args.triton and args.compile_only:
        parser.error("--triton solutions have no nvcc sources to compile-check")
    solutions = [s for k in kinds for s in list_solutions(k) if args.only in f"{s.kind}/{s.task_id}"]
    if not solutions:
        print("no solutions match", file=sys.stderr)
        return 1
    os.makedirs(args.build_dir, exist_ok=True)
    rows = []
    if args.compile_only:
        if args.device != "cuda":
            parser.error("--compile-only checks CUDA sources; use --device cuda")
        if shutil.which("nvcc") is None:
            parser.error("nvcc not found")
        # about a minute of nvcc per solution: say each one as it is done (in order), not only at the end
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for i, (sol, row) in enumerate(zip(solutions, pool.map(nvcc_check, solutions)), 1):
                rows.append((sol, row))
                print(f"  [{i}/{len(solutions)}] {sol.kind}/{sol.task_id}: {row['status']}", file=sys.stderr, flush=True)
    else:
        for sol in solutions:
            row = run_harness(sol, args.size, args.device, args.build_dir)
            rows.append((sol, row))
            print(f"  {sol.kind}/{sol.task_id}: {row['status']}", file=sys.stderr, flush=True)
    print_table(rows)
    return 0 if all(row["status"] in ("correct", "compiled") for _, row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
