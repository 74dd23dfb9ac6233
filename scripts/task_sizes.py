"""Times every built-in task's reference forward at one size on one device, to check the suite's sizes.

    python3 scripts/task_sizes.py --size cpu --device cpu              # cpu sizes, one thread
    python3 scripts/task_sizes.py --size gpu --device cuda --json sizes.json
    python3 scripts/task_sizes.py --size cpu --device cpu --only L1/2  # ids containing a substring

Targets: at the `cpu` size the forward should take under 100 ms on one CPU thread (aim 1-20 ms); at the
`gpu` size 0.1-15 ms on an H100-class GPU, with every input set and output at most 256 MiB (docs/tasks.md,
"Sizes": an elementwise op then takes ~0.13 ms on an H200, over the 0.1 ms floor a GPU timer still reads
well). Each figure is the median of `--runs` timed forwards after
`--warmup` untimed ones: perf_counter on CPU, CUDA events around the forward on CUDA. TF32 is off on CUDA,
as in the evaluation harness, so matmul and convolution references run at full fp32 precision.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from kernelbench.tasks.problem import load_problem  # noqa: E402
from kernelbench.tasks.task import Task  # noqa: E402

TASKS_DIR = ROOT / "kernelbench" / "tasks" / "builtin_tasks"
TARGET_MS = {"cpu": (0.0, 100.0), "gpu": (0.1, 15.0)}


@dataclass(frozen=True)
class TaskTiming:
    """One task's reference forward at one size and device."""

    task_id: str
    size: str
    device: str
    median_ms: float
    min_ms: float
    max_ms: float
    input_mib: float
    peak_mib: float
    """Peak allocated device memory during build and forward (CUDA only; 0 on CPU)."""
    in_range: bool
    error: str = ""


def discover(only: str = "") -> list[Task]:
    tasks = []
    for path in sorted(TASKS_DIR.glob("level*/[0-9][0-9]_*.py")):
        level = int(path.parent.name.removeprefix("level"))
        text = path.read_text()
        policy = "strict"
        for node in ast.parse(text).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "OP_POLICY" for t in node.targets):
                policy = ast.literal_eval(node.value)
        task = Task(id=f"L{level}/{path.stem}", level=level, name=path.stem, origin="builtin", source=text,
                    path=str(path), op_policy=policy)
        if only in task.id:
            tasks.append(task)
    return tasks


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time_forward_ms(model, inputs, device: str, warmup: int, runs: int) -> list[float]:
    for _ in range(warmup):
        model(*inputs)
    _sync(device)
    times = []
    for _ in range(runs):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def time_task(task: Task, size: str, device: str, warmup: int, runs: int) -> TaskTiming:
    problem = load_problem(task, size)
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    # Building on the device draws the inputs there: much faster than CPU randn for the gpu sizes.
    with torch.device(device), torch.no_grad():
        model = problem.Model(*problem.get_init_inputs()).eval()
        inputs = problem.get_inputs()
        input_mib = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor)) / 2**20
        times = _time_forward_ms(model, inputs, device, warmup, runs)
    peak_mib = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else 0.0
    median = statistics.median(times)
    low, high = TARGET_MS[size]
    return TaskTiming(task.id, size, device, median, min(times), max(times), input_mib, peak_mib,
                      in_range=low <= median < high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (the cpu target assumes 1)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="", help="time only tasks whose id contains this substring")
    parser.add_argument("--json", default="", help="write the figures to this file")
    args = parser.parse_args(argv)

    if args.device == "cuda":
        if not torch.cuda.is_available():
            parser.error("--device cuda needs a CUDA GPU")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(args.threads)

    results = []
    print(f"{'task':40} {'median ms':>10} {'min ms':>8} {'in MiB':>9} {'peak MiB':>9}  in range")
    for task in discover(args.only):
        try:
            r = time_task(task, args.size, args.device, args.warmup, args.runs)
        except Exception as e:  # one bad or too-big task must not hide the others' figures
            r = TaskTiming(task.id, args.size, args.device, float("nan"), float("nan"), float("nan"), 0.0, 0.0,
                           in_range=False, error=f"{type(e).__name__}: {str(e)[:200]}")
        results.append(r)
        verdict = "yes" if r.in_range else ("ERROR " + r.error if r.error else "no")
        print(f"{r.task_id:40} {r.median_ms:10.3f} {r.min_ms:8.3f} {r.input_mib:9.1f} {r.peak_mib:9.1f}  {verdict}",
              flush=True)

    low, high = TARGET_MS[args.size]
    bad = [r for r in results if not r.in_range]
    print(f"\n{len(results) - len(bad)}/{len(results)} tasks in range [{low:g}, {high:g}) ms "
          f"(size {args.size}, device {args.device}, {args.threads} thread(s))")
    slowest = sorted((r for r in results if not r.error), key=lambda r: r.median_ms, reverse=True)[:5]
    print("slowest: " + ", ".join(f"{r.task_id} {r.median_ms:.2f} ms" for r in slowest))
    if args.json:
        meta = {"size": args.size, "device": args.device, "threads": args.threads, "runs": args.runs,
                "torch": torch.__version__,
                "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"}
        Path(args.json).write_text(json.dumps({"meta": meta, "tasks": [asdict(r) for r in results]}, indent=1))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
