"""Throughput of the local and the Ray executor with the same workers, and how long the run stage waited.

    python scripts/bench_executors.py                               # 1 and 2 workers, 8 candidates each
    python scripts/bench_executors.py --workers 1 --candidates 2    # a quick check that it runs
    python scripts/bench_executors.py --ray-address auto            # Ray actors on the cluster this machine joined

Every measurement evaluates N new candidate files that share one build: the compile stage runs each file's
import child (the cache serves the compiler), the run stage its reference and run children, so both stages
do real work. The build is made once before any timing, and Ray's actors are started before their clock
starts (their start-up is printed apart). Figures per executor and worker count (W compile + W run
workers): evaluations per minute, and the share of the run workers' time spent waiting for compiles,
1 - (time inside the run stage) / (W x wall). Target: Ray costs at most 10 % of the local executor's
throughput with the same workers. Prints figures; asserts nothing. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runs from a checkout, installed or not
from kernelbench.harness.config import EvalConfig  # noqa: E402
from kernelbench.harness.evaluate import evaluate  # noqa: E402
from kernelbench.executors.executor import ExecutorConfig, make_evaluator  # noqa: E402
from kernelbench.tasks.task import Task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "core"
TASK = Task(id="bench/relu", level=1, name="relu", origin="bench", source=(FIXTURES / "relu_task.py").read_text())
CANDIDATE = (FIXTURES / "relu_ok.py").read_text()


def variant(src: str) -> str:
    """A new file with the same compiled parts: its own import outcome, the shared build."""
    return f"# bench variant {secrets.token_hex(4)}\n{src}"


def measure(cfg: EvalConfig, executor: str, workers: int, n: int, address: str) -> dict:
    start = time.perf_counter()
    ev = make_evaluator(cfg, ExecutorConfig(kind=executor, ray_address=address, compile_workers=workers,
                                             run_workers=workers))
    if executor == "ray":
        ev.wait_ready()
    startup = time.perf_counter() - start
    batch = [(TASK, variant(CANDIDATE)) for _ in range(n)]
    t0 = time.perf_counter()
    results = ev.evaluate_many(batch)
    wall = time.perf_counter() - t0
    busy = ev.run_busy_s
    ev.close()
    return {"executor": executor, "workers": workers, "n": n, "wall_s": wall, "startup_s": startup,
            "per_min": 60 * n / wall, "run_wait": max(0.0, 1 - busy / (workers * wall)),
            "statuses": Counter(r.status for r in results), "retries": sum(r.retries for r in results)}


def start_ray(address: str, workers: int) -> None:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        ray.init(address=address)
    else:  # enough logical CPUs for W compile + W run actors; the work itself runs in sandboxed children
        ray.init(num_cpus=max(os.cpu_count() or 1, 2 * workers), include_dashboard=False,
                 object_store_memory=200 * 1024 * 1024, log_to_driver=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2", help="worker counts to measure (each: W compile + W run workers)")
    ap.add_argument("--candidates", type=int, default=8, help="candidates per measurement")
    ap.add_argument("--timing-trials", type=int, default=20)
    ap.add_argument("--ray-address", default="", help="Ray cluster (default: a local Ray started here)")
    ap.add_argument("--build-cache", default="", help="build cache folder (default: the harness's, so the one "
                                                      "build survives between runs)")
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    cfg = EvalConfig(build_cache_dir=args.build_cache, timing_trials=args.timing_trials)
    print(f"executor benchmark: {args.candidates} candidates per measurement, {os.cpu_count()} cores")
    first = evaluate(TASK, CANDIDATE, cfg)  # the shared build, outside every clock
    print(f"  build ready ({first.status}, compile {first.compile_s:.1f} s)")
    start_ray(args.ray_address, max(counts))
    rows = []
    for workers in counts:
        for executor in ("local", "ray"):
            row = measure(cfg, executor, workers, args.candidates, args.ray_address)
            rows.append(row)
            print(f"  {executor:<5} W={workers}  {row['per_min']:7.2f} evals/min  wall {row['wall_s']:6.1f} s  "
                  f"run stage waiting {100 * row['run_wait']:5.1f} %  start-up {row['startup_s']:5.1f} s  "
                  f"statuses {dict(row['statuses'])}  retries {row['retries']}")
    print("throughput ray / local (target >= 0.90):")
    for workers in counts:
        local, ray_ = (next(r for r in rows if r["executor"] == e and r["workers"] == workers) for e in ("local", "ray"))
        print(f"  W={workers}: {ray_['per_min'] / local['per_min']:.3f}")


if __name__ == "__main__":
    main()
