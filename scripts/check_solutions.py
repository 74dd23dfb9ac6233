#!/usr/bin/env python3
"""Check the hand-written reference solutions: correctness and speed against eager PyTorch, or an nvcc compile.

Launch:
    python3 scripts/check_solutions.py --device cpu --size cpu             # every C++ solution (cpu and cpu_slow)
    python3 scripts/check_solutions.py --device cpu --only L1/19_softmax    # one task (substring of the id)
    python3 scripts/check_solutions.py --device cuda --compile-only         # nvcc check of every CUDA solution
    python3 scripts/check_solutions.py --device cuda --size gpu             # on a GPU machine
    python3 scripts/check_solutions.py --device cpu --checker child         # without the harness
    python3 scripts/check_solutions.py --triton --device cpu                # Triton ones, interpreted (correctness)
    python3 scripts/check_solutions.py --triton --device cuda --size gpu    # Triton ones compiled, on a GPU

When the harness (`kernelbench.harness.evaluate.evaluate`) is importable it judges each solution, with every check
it applies. Otherwise each solution runs in its own child process here: both models are built under the
same seed, outputs are compared with allclose(atol=1e-4, rtol=1e-4), on every input configuration of the task
(`INPUT_CONFIGS`; timed on the first), on randn inputs and on the same inputs
scaled by 3 (not for kernelbench.tasks.solutions.SCALED_INPUTS_UNRELIABLE, whose fp32 reference is itself out of
tolerance there), and both forwards are timed (median, one intra-op thread on CPU). The compile-only check uses
`kernelbench.harness.nvcc_check.nvcc_compile_check` when present, else nvcc directly with a shim header for the one
generated file the CPU torch wheel lacks (see DESIGN.md, "Devices").
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbench.tasks.builtin import load_builtin  # noqa: E402
from kernelbench.tasks.solutions import SCALED_INPUTS_UNRELIABLE, Solution, list_solutions  # noqa: E402

TOL = 1e-4
SCALES = (1.0, 3.0)
# The CPU wheel lacks this generated header; a shared-library build of c10_cuda defines one macro in it.
SHIM_HEADER = ("c10/cuda/impl/cuda_cmake_macros.h",
               "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
# What load_inline puts in front of cuda_sources (torch/utils/cpp_extension.py).
CUDA_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n\n"


def harness_evaluate():
    """`kernelbench.harness.evaluate.evaluate` and `EvalConfig` when the harness is installed, else None."""
    spec = importlib.util.find_spec("kernelbench.harness.evaluate")
    if spec is None:
        return None
    module = importlib.import_module("kernelbench.harness.evaluate")
    return getattr(module, "evaluate", None)


# ---------------------------------------------------------------- child process (fallback checker)

def _time_ms(fn, inputs, device: str, trials: int) -> float:
    import torch

    for _ in range(3):
        fn(*inputs)
    samples = []
    for _ in range(trials):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    return samples[len(samples) // 2]


def child_main(task_id: str, solution_path: str, size: str, device: str, trials: int) -> dict:
    """Build both models under one seed, compare on several inputs, time both; return a result row."""
    import torch

    from kernelbench.tasks.problem import exec_source, load_problem

    torch.set_num_threads(1)
    task = next(t for t in load_builtin() if t.id == task_id)
    problem = load_problem(task, size)
    started = time.perf_counter()
    solution = exec_source(Path(solution_path).read_text(), solution_path, "solution")
    compile_s = time.perf_counter() - started
    init = problem.get_init_inputs()
    torch.manual_seed(1234)
    ref = problem.Model(*init).to(device)
    torch.manual_seed(1234)
    new = solution.ModelNew(*init).to(device)
    worst = 0.0
    configs = problem.configs  # every input configuration (INPUT_CONFIGS), the timed one first
    with torch.no_grad():
        for config, seed in [(c, seed) for c in configs for seed in (1, 2)]:
            torch.manual_seed(seed)
            where = f"configuration {config.index + 1}, " if len(configs) > 1 else ""
            inputs0 = [x.to(device) if isinstance(x, torch.Tensor) else x for x in config.get_inputs()]
            if config.index == 0:
                base = inputs0
            scales = SCALES[:1] if task_id in SCALED_INPUTS_UNRELIABLE else SCALES
            for scale in scales:
                inputs = [x * scale if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs0]
                expected = ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
                got = new(*inputs)
                if got.shape != expected.shape or got.dtype != expected.dtype:
                    return {"status": "incorrect", "detail": f"{where}shape/dtype {tuple(got.shape)} {got.dtype} "
                            f"vs {tuple(expected.shape)} {expected.dtype}"}
                if not torch.allclose(got, expected, atol=TOL, rtol=TOL, equal_nan=True):
                    diff = (got.double() - expected.double()).abs().max().item()
                    return {"status": "incorrect", "detail": f"{where}max abs diff {diff:.3g} (scale {scale})"}
                if got.is_floating_point():
                    worst = max(worst, (got.double() - expected.double()).abs().max().item())
        ref_ms = _time_ms(ref, base, device, trials)
        new_ms = _time_ms(new, base, device, trials)
    return {"status": "correct", "ref_ms": ref_ms, "new_ms": new_ms, "max_abs_diff": worst,
            "compile_s": compile_s}


def run_child(solution: Solution, size: str, device: str, build_dir: str, trials: int) -> dict:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=build_dir, OMP_NUM_THREADS="1")
    argv = [sys.executable, __file__, "--child", solution.task_id, solution.path, size, device, str(trials)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"status": "error", "detail": " | ".join(tail)}
    return json.loads(lines[-1])


def run_harness(evaluate, solution: Solution, size: str, device: str, build_dir: str) -> dict:
    from kernelbench.harness.config import EvalConfig

    task = next(t for t in load_builtin() if t.id == solution.task_id)
    extra = 0 if solution.task_id in SCALED_INPUTS_UNRELIABLE else EvalConfig().extra_distribution_trials
    config = EvalConfig(device=device, size=size, build_cache_dir=build_dir, extra_distribution_trials=extra)
    result = evaluate(task, solution.source, config)
    row = {"status": result.status, "ref_ms": result.ref_runtime_ms, "new_ms": result.runtime_ms}
    if "interpreted" in result.flags:  # Triton on CPU: correctness only, no time worth showing
        row.update(ref_ms=0.0, new_ms=0.0, detail=f"interpreted, run stage {result.run_s:.0f}s")
    if result.status != "correct":
        row["detail"] = getattr(result, "feedback", "") or getattr(result, "message", "")
    return row


# ---------------------------------------------------------------- nvcc compile check

def captured_load_inline_args(source: str, filename: str) -> dict:
    """Execute a solution with load_inline replaced by a recorder, returning the keyword arguments it got."""
    import torch.utils.cpp_extension as cpp_extension

    from kernelbench.tasks.problem import exec_source

    seen: dict = {}

    def record(*args, **kwargs):
        names = ("name", "cpp_sources", "cuda_sources", "functions")
        seen.update(dict(zip(names, args)), **kwargs)
        return object()

    original = cpp_extension.load_inline
    cpp_extension.load_inline = record
    try:
        exec_source(source, filename, "solution_source")
    finally:
        cpp_extension.load_inline = original
    return seen


def nvcc_check(solution: Solution, shim_dir: str) -> dict:
    """Compile the solution's cuda_sources with nvcc (sm_90, torch headers), as load_inline would."""
    import torch.utils.cpp_extension as cpp_extension

    builds = importlib.util.find_spec("kernelbench.harness.nvcc_check")
    if builds is not None:
        module = importlib.import_module("kernelbench.harness.nvcc_check")
        check = getattr(module, "nvcc_compile_check", None)
        if check is not None:
            started = time.perf_counter()
            outcome = check(solution.source)
            ok = bool(getattr(outcome, "ok", outcome))
            return {"status": "compiled" if ok else "compile_error", "compile_s": time.perf_counter() - started,
                    "detail": "" if ok else str(getattr(outcome, "log", ""))[-300:]}
    args = captured_load_inline_args(solution.source, solution.path)
    cuda_sources = args.get("cuda_sources") or []
    if isinstance(cuda_sources, str):
        cuda_sources = [cuda_sources]
    if not cuda_sources:
        return {"status": "compile_error", "detail": "no cuda_sources passed to load_inline"}
    missing = [f for f in args.get("functions") or [] if not any(f in s for s in cuda_sources)]
    if missing:
        return {"status": "compile_error", "detail": f"functions not defined in cuda_sources: {missing}"}
    include = cpp_extension.include_paths()
    with tempfile.TemporaryDirectory(prefix="nvcc-check-") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(CUDA_PRELUDE + "\n".join(cuda_sources))
        argv = ["nvcc", "-c", "-std=c++17", "-arch=sm_90", "-O2", f"-I{shim_dir}", str(src),
                "-o", str(Path(tmp) / "kernel.o"), "-diag-suppress", "3306"] + [f"-I{p}" for p in include]
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    row = {"status": "compiled" if proc.returncode == 0 else "compile_error",
           "compile_s": time.perf_counter() - started}
    if proc.returncode != 0:
        errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
        row["detail"] = " | ".join(errors[:3])[-400:]
    return row


def make_shim_dir() -> str:
    shim = tempfile.mkdtemp(prefix="cuda-shim-")
    path = Path(shim) / SHIM_HEADER[0]
    path.parent.mkdir(parents=True)
    path.write_text(SHIM_HEADER[1])
    return shim


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
    parser.add_argument("--trials", type=int, default=30, help="timed calls per model (fallback checker)")
    parser.add_argument("--build-dir", default=os.path.join(tempfile.gettempdir(), "kernel-agent-solution-builds"))
    parser.add_argument("--checker", choices=("auto", "harness", "child"), default="auto",
                        help="harness: kernelbench.harness.evaluate; child: this script's own subprocess check; "
                             "auto: the harness when importable")
    parser.add_argument("--triton", action="store_true",
                        help="the Triton solutions (interpreted on --device cpu: correctness only; compiled on cuda)")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        task_id, path, size, device, trials = args.child
        print(json.dumps(child_main(task_id, path, size, device, int(trials))))
        return 0
    kinds = ("triton",) if args.triton else ("cuda",) if args.device == "cuda" else ("cpu", "cpu_slow")
    if args.triton and (args.compile_only or args.checker == "child"):
        parser.error("--triton checks through the harness only (no nvcc sources, no child checker)")
    solutions = [s for k in kinds for s in list_solutions(k) if args.only in f"{s.kind}/{s.task_id}"]
    if not solutions:
        print("no solutions match", file=sys.stderr)
        return 1
    os.makedirs(args.build_dir, exist_ok=True)
    if args.compile_only:
        if args.device != "cuda":
            parser.error("--compile-only checks CUDA sources; use --device cuda")
        if shutil.which("nvcc") is None:
            parser.error("nvcc not found")
        shim = make_shim_dir()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda s: nvcc_check(s, shim), solutions))
        rows = list(zip(solutions, results))
    else:
        evaluate = harness_evaluate() if args.checker != "child" else None
        if args.checker == "harness" and evaluate is None:
            parser.error("kernelbench.harness.evaluate is not importable")
        rows = []
        for sol in solutions:
            if evaluate is not None:
                row = run_harness(evaluate, sol, args.size, args.device, args.build_dir)
            else:
                row = run_child(sol, args.size, args.device, args.build_dir, args.trials)
            rows.append((sol, row))
            print(f"  {sol.kind}/{sol.task_id}: {row['status']}", file=sys.stderr, flush=True)
    print_table(rows)
    return 0 if all(row["status"] in ("correct", "compiled") for _, row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
