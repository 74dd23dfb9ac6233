"""`kernel-agent eval`: evaluate one candidate solution file against one task.

    kernel-agent eval --task L1/01_relu --candidate my_relu.py --device cpu --json
    kernel-agent eval --task path/to/problem.py --candidate sol.py --compile-only   # CUDA sources, nvcc, no GPU

Exit 0 whenever the candidate was judged, whatever the verdict; 2 for bad arguments or an unreadable task;
4 when the harness failed (`harness_error`, after one retry: not a verdict on the candidate).
`--json` prints one `EvalResult` object in every mode, `--compile-only` included.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

from cli import checks
from cli.main import UsageError
from kernelbench.harness import static_checks
from kernelbench.harness.build.nvcc_check import nvcc_compile_check
from kernelbench.harness.feedback import render
from kernelbench.harness.isolation import sandbox
from kernelbench.harness.result import COMPILE_ERROR, COMPILED, Conditions, EvalResult, REJECTED
from kernelbench.tasks.task import TaskFormatError
from kernelbench.tasks.task_file import read_task_file, TaskFileError

# Imports inside functions: each command loads what it needs when it runs: `kernel-agent --help`, a mistyped flag
# and `kernel-agent tasks` answer without torch.


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("eval", help="evaluate a candidate solution file against a task",
                              description="Compile, check and time one candidate (KernelBench solution format).")
    p.add_argument("--task", required=True, help="a problem file path, or a built-in task id like L1/03_gelu")
    p.add_argument("--candidate", required=True, help="the solution file (defines class ModelNew)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--size", choices=("cpu", "gpu"), default=None, help="task size (default: the device's)")
    p.add_argument("--trials", type=int, default=None, help="timed trials (default 100)")
    p.add_argument("--json", action="store_true", help="print one JSON object (EvalResult.to_dict())")
    p.add_argument("--compile-only", action="store_true",
                   help="only compile the candidate's CUDA sources with nvcc, without executing it (no GPU needed)")
    p.add_argument("--op-policy", choices=("strict", "partial"), default=None)
    p.add_argument("--cache-dir", default="", help="build cache folder (default ~/.cache/kernel-agent/builds)")
    add_profile_option(p)


def add_profile_option(p: argparse.ArgumentParser) -> None:
    """`--profile` (eval, bench, optimize): `EvalConfig.profile`."""
    p.add_argument("--profile", choices=("torch", "ncu", "off"), default="torch",
                   help="profile one untimed call after a correct run, for the feedback (ncu: + Nsight Compute on CUDA)")


def resolve_task(spec: str, what: str = "--task"):
    """A path to a problem file, else a task id through the catalog; `what` names the argument in errors."""
    if not os.path.exists(spec) and (spec.endswith(".py") or spec.startswith(("/", "./", "../", "~"))):
        raise UsageError(f"{what} {spec}: file not found")
    if os.path.isfile(spec):
        try:
            return read_task_file(spec)
        except TaskFileError as e:
            raise UsageError(str(e)) from None
    try:
        from kernelbench.tasks.catalog import find_task
    except ImportError:
        raise UsageError(f"no task file {spec!r} (and no task catalog to look ids up in)") from None
    try:
        return find_task(spec)
    except (ValueError, OSError) as e:
        raise UsageError(f"unknown task {spec!r}: {e}") from None


def _summary(task_id: str, r) -> str:
    from rewards import ScoreConfig

    c, score = r.conditions, ScoreConfig().score(r)
    lines = [f"{task_id}: {r.status}" + (f"  speedup {r.speedup:.3g}x ({r.runtime_ms:.4g} ms vs {r.ref_runtime_ms:.4g} ms)"
                                         if r.correct else ""),
             f"  score {'-' if score is None else format(score, '.3g')} (default reward settings)  compile {r.compile_s:.1f} s{' (cached)' if r.cached_build else ''}  run {r.run_s:.1f} s",
             f"  {c.device} {c.device_name} | torch {c.torch_version} | sandbox {c.sandbox or '-'} | policy {c.op_policy}"]
    if r.flags:
        lines.append("  flags: " + ", ".join(r.flags))
    lines.append("")
    lines.append(r.feedback)
    return "\n".join(lines)


def compile_only_result(check, src: str):
    """The nvcc check as an `EvalResult`, the shape every other evaluation prints: `compiled` and the status
    (`correct` is never claimed: nothing ran), the static checks' flags, the compile time, the log."""

    reasons = {v.flag: v.reason for v in static_checks.check_source(src, "cuda")}
    status = COMPILE_ERROR if not check.ok else (REJECTED if reasons else COMPILED)
    detail = (f"nvcc compile check: {'ok' if check.ok else 'failed'} ({check.sources} source(s))\n{check.log}").strip()
    return EvalResult(status=status, compiled=check.ok, flags=tuple(reasons), compile_s=check.wall_s,
                      feedback=render(status, detail=detail, flags=tuple(reasons), reasons=reasons),
                      conditions=Conditions(device="cuda", sandbox=sandbox.sandbox_kind()))


def _compile_only(args, src: str) -> int:
    try:
        check = nvcc_compile_check(src)
    except FileNotFoundError as e:  # no compiler is not a verdict on the candidate
        raise UsageError(f"--compile-only needs {e}") from None
    if args.json:
        print(compile_only_result(check, src).to_json())
    else:
        print(f"nvcc compile check: {'ok' if check.ok else 'FAILED'} ({check.sources} source(s), {check.wall_s:.1f} s)")
        if check.log:
            print(check.log)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        with open(args.candidate) as f:
            src = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read candidate {args.candidate}: {e}") from None
    if args.trials is not None and args.trials < 1:
        raise UsageError("--trials must be >= 1")

    checks.size_for(args.device, args.size)
    if args.compile_only:
        return _compile_only(args, src)
    from kernelbench.harness.children import prestart_warm_worker
    from kernelbench.harness.config import EvalConfig

    config = EvalConfig(device=args.device, size=args.size or args.device.replace("cuda", "gpu"),
                        op_policy=args.op_policy or "", build_cache_dir=args.cache_dir, profile=args.profile)
    if args.trials is not None:
        config = replace(config, timing_trials=args.trials)
    task = resolve_task(args.task)  # a bad task is one line and exit 2, before anything starts
    prestart_warm_worker(config)  # the warm worker imports torch while this process does (neither has yet)
    from kernelbench.harness.evaluate import evaluate
    from kernelbench.harness.reference import HarnessError
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda needs a CUDA GPU (use --compile-only to check CUDA sources without one)")
    try:
        result = evaluate(task, src, config)
    except (HarnessError, TaskFormatError) as e:
        raise UsageError(str(e)) from None
    print(result.to_json() if args.json else _summary(task.id, result))
    if result.status == "harness_error":
        sys.stderr.write("kernel-agent eval: harness error: the harness failed on this evaluation (retried once); "
                         "no verdict on the candidate\n")
        return 4
    return 0
