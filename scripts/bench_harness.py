"""Benchmark of the evaluation harness itself: latency per stage, throughput of a group, timing stability.

    python scripts/bench_harness.py                  # CPU: C++ candidates (about ten minutes on 2 cores)
    python scripts/bench_harness.py --extra          # + PCH variants and 1-vs-2 worker scaling
    python scripts/bench_harness.py --device cuda    # GPU: CUDA load_inline and NVRTC (cupy) candidates
    python scripts/bench_harness.py --group-only 16  # only: a GRPO group through Evaluator, with and without group=
    python scripts/bench_harness.py --tasks L1/01_relu,L1/21_matmul_square   # only: built-in tasks' warm evaluations

Prints figures and, last, a table of each against its target; asserts nothing. Every ratio is measured in this
run on this machine: against a bare `python -c "import torch"`, and the warm workers (`EvalConfig.warm_workers`,
`kernelbench.harness.isolation.warm_child`) against a fresh interpreter per child (the path before them). Targets: a warm
evaluation inside a running evaluator <= 0.5x `import torch`; `kernel-agent eval` end to end with a warm build
cache <= 2.5x; a group of 16 distinct honest candidates of one task >= 4x the evaluations per minute of the
fresh-interpreter path; cold compile stage <= 8 s (median of 3); speedup CV over 16 evaluations <= 3 %
memory-bound and <= 2 % compute-bound (CPU: paired timing, `EvalConfig.timing_rounds`). GPU: NVRTC compile < 1 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runs from a checkout, installed or not
from kernelbench.harness.build import builder, pch  # noqa: E402
from kernelbench.harness.isolation import sandbox, warm_child
from kernelbench.tasks.catalog import find_task  # noqa: E402
from kernelbench.harness.config import EvalConfig  # noqa: E402
from kernelbench.harness.evaluate import evaluate  # noqa: E402
from kernelbench.executors.evaluator import Evaluator  # noqa: E402
from kernelbench.tasks.task import Task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "core"
# larger than the test size, so that timing noise does not dominate a ReLU (GPU: 64 MB per input)
TASK_SRC = ((FIXTURES / "relu_task.py").read_text().replace('"batch_size": 64, "dim": 1024', '"batch_size": 512, "dim": 4096')
            .replace("batch_size = 256", "batch_size = 4096"))
TASK = Task(id="bench/relu", level=1, name="relu", origin="bench", source=TASK_SRC)
COMPUTE_BOUND = ("L1/21_matmul_square", "kernelbench/tasks/solutions/cpu/L1/21_matmul_square.py")
"""The CPU stability figure is read on a compute-bound candidate as well: on a shared 2-core VM the memory
bandwidth an 8 MB ReLU gets drifts by +-30 % within one process (the median of 100 calls of torch.relu moved
from 0.62 to 1.06 ms between consecutive blocks); paired timing cancels the drift between its rounds, not
what differs between the two processes, so a memory-bound ratio stays the noisier one."""


def fresh(src: str, cflags: str = '["-O3", "-fopenmp"]') -> str:
    """The same candidate under a new cache key and extension name (forces a cold compile), built with
    `cflags`: by default the flags the PCH is built with (`load_inline_hook.STANDARD_CFLAGS`, those of the prompts'
    example); gcc ignores a PCH built with other flags."""
    tag = secrets.token_hex(4)
    return (f"# bench variant {tag}\n" + src.replace('name="core_', f'name="bench_{tag}_')
            .replace('extra_cflags=["-O3"]', f"extra_cflags={cflags}"))


def wall(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def torch_import_s(n: int = 3) -> float:
    times = [wall(lambda: subprocess.run([sys.executable, "-c", "import torch"], check=True))[0] for _ in range(n)]
    return statistics.median(times)


def sandbox_start_s() -> tuple[float, float]:
    with sandbox.SlotLease() as slot:
        scratch = sandbox.make_scratch(slot.uid)
        bare = sandbox.run_child(sandbox.ChildSpec((sys.executable, "-I", "-c", "pass"), scratch), slot).wall_s
        tor = sandbox.run_child(sandbox.ChildSpec((sys.executable, "-I", "-c", "import torch"), scratch), slot).wall_s
    return bare, tor


def row(name: str, value: str, target: str = "") -> None:
    print(f"  {name:<46} {value:>14}   {target}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    # 16: a CV from n evaluations pins the true CV only to within a factor (90 %, chi-square): 0.75x-1.92x of
    # itself at 8, 0.80x-1.48x at 16 (`cv_interval`); at 5 the figure could not tell 4 % from 9 %
    ap.add_argument("--repeats", type=int, default=16, help="evaluations of one candidate for the CV")
    ap.add_argument("--group", type=int, default=16, help="distinct candidates of one task in the group figure (0: skip)")
    ap.add_argument("--group-only", type=int, default=0, help="only the group figure's detail: this many candidates of "
                    "one task evaluated alone and as one group (`Evaluator.submit(..., group=)`), warm workers both")
    ap.add_argument("--baseline", default=BASELINE_COMMIT, help="commit whose harness the group figure is also "
                    "measured with, in this run (default: the harness before warm workers and shared references); "
                    "empty: only the fresh-interpreter flag path")
    ap.add_argument("--batch", type=int, default=4, help="--extra: candidates in the 1-vs-2 worker batch")
    ap.add_argument("--extra", action="store_true", help="also the PCH variants and the 1-vs-2 worker scaling")
    ap.add_argument("--tasks", default="", help="only: warm evaluations of these built-in tasks' CPU reference "
                    "solutions (comma-separated ids, e.g. L1/01_relu,L1/21_matmul_square), as evaluated and with the "
                    "timing at its floor")
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="ka-bench-cache-")
    size = "gpu" if args.device == "cuda" else "cpu"
    cfg = EvalConfig(device=args.device, size=size, build_cache_dir=cache, static_checks=False)
    cand = (FIXTURES / ("cuda_relu.py" if args.device == "cuda" else "relu_ok.py")).read_text()
    print(f"harness benchmark on {args.device} ({os.cpu_count()} cores, sandbox {sandbox.sandbox_kind()}, "
          f"warm workers {'on' if warm_child.serves(sandbox.ChildSpec((), '', worker=sandbox.WorkerEntry(''))) else 'unavailable (not root)'})")
    if args.group_only > 0:
        group_throughput(cfg, cand, args.group_only)
        return
    if args.tasks:
        task_evaluations(cfg, [t for t in args.tasks.split(",") if t])
        return
    targets: list[tuple[str, float, str, bool]] = []

    base = torch_import_s()
    bare, tor = sandbox_start_s()
    row("python -c 'import torch' (baseline)", f"{base:.2f} s")
    row("sandbox start: empty python child", f"{bare:.2f} s")
    row("sandbox start: child importing torch", f"{tor:.2f} s")
    pch_s, _ = wall(pch.ensure_pch)
    row("PCH ready (built now if missing)", f"{pch_s:.1f} s", "once per toolchain")

    src = fresh(cand)
    cold_s, cold = wall(lambda: evaluate(TASK, src, cfg))
    # two more cold compiles (compile stage alone): one compile on this VM varies by +-15 %, and the first of
    # a process also pays for reading the PCH and the compiler from disk
    more = [builder.build(fresh(cand), cfg, pch_dir=pch.ensure_pch(device=args.device)).compile_s for _ in range(2)]
    cold_all = [cold.compile_s] + more
    cold_median = statistics.median(cold_all)
    row("cold compile stage, 3 candidates: median", f"{cold_median:.1f} s", "each: " + " / ".join(f"{c:.1f}" for c in cold_all))
    targets.append(("cold compile stage (median of 3)", cold_median, "<= 8 s", cold_median <= 8))
    if args.extra and args.device == "cpu":
        pch_variants(cfg, cand)

    per_path = {warm: warm_evaluation(replace(cfg, warm_workers=warm), src) for warm in (False, True)}
    for warm, (t, r) in per_path.items():
        label = "warm workers" if warm else "fresh interpreters"
        row(f"warm-cache evaluation, {label}: median of 3", f"{t:.2f} s", f"{t / base:.2f}x import torch")
        row("  run stage / timed trials (median x trials)", f"{r.run_s:.2f} s",
            f"{r.runtime_ms * r.conditions.timing_trials / 1e3:.3f} s; {r.status} / {r.speedup:.3f}x")
    warm_ratio = per_path[True][0] / base
    targets.append(("warm evaluation in a running evaluator / import torch", warm_ratio, "<= 0.5x", warm_ratio <= 0.5))
    # What no timing setting removes (`timing_floor`): above 0.5x, the warm evaluation's target cannot be met by
    # any timing plan on this machine.
    floor_cfg = timing_floor(cfg)
    floor_s, floor_r = warm_evaluation(floor_cfg, src)
    row("warm evaluation, timing at its floor: median of 3", f"{floor_s:.2f} s",
        f"{floor_s / base:.2f}x import torch; {floor_r.status}")
    notes = [f"warm evaluation with the timing at its floor (no paired blocks, no hidden checks): "
             f"{floor_s / base:.2f}x import torch"]

    cli = {warm: cli_evaluation(args.device, src, cache, warm) for warm in (False, True)}
    for warm, t in cli.items():
        row(f"`kernel-agent eval` end to end, {'warm workers' if warm else 'fresh interpreters'}", f"{t:.2f} s",
            f"{t / base:.2f}x import torch")
    cli_ratio = cli[True] / base
    targets.append(("`kernel-agent eval` end to end / import torch", cli_ratio, "<= 2.5x", cli_ratio <= 2.5))

    cvs = [("memory-bound", *stability("ReLU, memory-bound", TASK, src, cfg, args.repeats), 0.03)]
    if args.device == "cpu":
        cvs.append(("compute-bound", *stability(f"{COMPUTE_BOUND[0]}, compute-bound", find_task(COMPUTE_BOUND[0]),
                                                (ROOT / COMPUTE_BOUND[1]).read_text(), cfg, args.repeats), 0.02))
    for kind, cv, n, bound in cvs:
        targets.append((f"speedup CV over {n} evaluations, {kind}", 100 * cv, f"<= {100 * bound:.0f} %", cv <= bound))

    if args.device == "cuda":
        nvrtc_bench(cfg)
    if args.group > 0:
        old_rate, why = baseline_group_rate(args.baseline, args.device, cand, args.group) if args.baseline else (0.0, "")
        if why:
            row(f"group of {args.group}, baseline {args.baseline}", "not measured", why)
        rates = {warm: group_rate(replace(cfg, warm_workers=warm), cand, args.group, "bench-group" if warm else "")
                 for warm in (False, True)}
        ratio = rates[True] / rates[False]
        row(f"  group of {args.group}: warm workers and one group / fresh interpreters, each alone", f"{ratio:.2f}x")
        # the floor again, for a member of a group: the reference's outputs (and, timed one side after the other,
        # its timing) computed once for the group, so what is left per candidate is its run child and verdict
        floor_rate = group_rate(floor_cfg, cand, args.group, "bench-group-floor", label="timing at its floor")
        notes.append(f"a group member's evaluation with the timing at its floor (the group's reference shared): "
                     f"{60 / floor_rate:.2f} s = {60 / floor_rate / base:.2f}x import torch")
        if args.device == "cpu":  # not the default: timings take turns (slots.TimingLease), untimed work overlaps
            two = group_rate(cfg, cand, args.group, "bench-group", run_workers=2)
            if old_rate > 0:
                row(f"  group of {args.group}, 2 run workers / the harness of {args.baseline}", f"{two / old_rate:.2f}x",
                    "a measured option, not the default")
        if old_rate > 0:
            ratio = rates[True] / old_rate
            row(f"  group of {args.group}: this harness / the harness of {args.baseline}", f"{ratio:.2f}x")
            targets.append((f"group of {args.group}: evaluations per minute, this / {args.baseline}", ratio, ">= 4x",
                            ratio >= 4))
        else:
            targets.append((f"group of {args.group}: evaluations per minute, new path / flag path", ratio, ">= 4x",
                            ratio >= 4))
    if args.extra and args.batch > 0:
        throughput(cfg, cand, args.batch)

    print("\ntargets (this run, this machine):")
    for name, value, target, ok in targets:
        print(f"  {name:<58} {value:>8.2f}   {target:<8} {'met' if ok else 'NOT MET'}")
    for note in notes:
        print(f"  (not a target) {note}")


def warm_evaluation(cfg: EvalConfig, src: str, n: int = 3, task: Task = TASK) -> tuple[float, object]:
    """Median wall time of `n` evaluations of a built candidate, after one that starts what a running evaluator
    already has (its warm worker, the build in the cache)."""
    evaluate(task, src, cfg)
    runs = [wall(lambda: evaluate(task, src, cfg)) for _ in range(n)]
    times = sorted(t for t, _ in runs)
    return statistics.median(times), runs[-1][1]


def timing_floor(cfg: EvalConfig) -> EvalConfig:
    """`cfg` with the timing at its floor: one block a side of `min_timing_trials` calls, no hidden check calls, no
    profile. What is left is what any timing plan keeps: the children, the inputs, the correctness calls of every
    configuration, the checks of which code ran and the verdict."""
    return replace(cfg, timing_trials=cfg.min_timing_trials, timing_rounds=0, timing_checks=0, profile="off")


def task_evaluations(cfg: EvalConfig, ids: list[str]) -> None:
    """Warm evaluations of built-in tasks at their CPU size (their reference solutions, built first), with the
    default timing and with the timing at its floor, against `import torch`: what the benchmark's ReLU stands for."""
    base = torch_import_s()
    row("python -c 'import torch' (baseline)", f"{base:.2f} s")
    floor_cfg = timing_floor(cfg)
    for task_id in ids:
        path = ROOT / "kernelbench" / "tasks" / "solutions" / "cpu" / f"{task_id}.py"
        if not path.is_file():
            raise SystemExit(f"no CPU reference solution for {task_id!r} ({path})")
        task, src = find_task(task_id), path.read_text()
        for label, c in (("as evaluated", cfg), ("timing at its floor", floor_cfg)):
            t, r = warm_evaluation(c, src, task=task)
            row(f"{task_id}, {label}: median of 3", f"{t:.2f} s", f"{t / base:.2f}x import torch; {r.status}")


def cli_evaluation(device: str, src: str, cache: str, warm: bool, n: int = 3) -> float:
    """Median wall time of `kernel-agent eval` as a user runs it (a new process; the build already cached)."""
    folder = tempfile.mkdtemp(prefix="ka-bench-cli-")
    task_file, cand_file = os.path.join(folder, "task.py"), os.path.join(folder, "candidate.py")
    Path(task_file).write_text(TASK.source)
    Path(cand_file).write_text(src)
    env = dict(os.environ, **{warm_child.OFF_ENV: "1" if warm else "0"})
    argv = [sys.executable, "-m", "cli.main", "eval", "--task", task_file, "--candidate", cand_file, "--device",
            device, "--cache-dir", cache, "--json"]
    times = []
    for _ in range(n):
        t, out = wall(lambda: subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True))
        if out.returncode != 0:
            raise RuntimeError(f"kernel-agent eval failed ({out.returncode}): {out.stderr[-800:]}")
        times.append(t)
    return statistics.median(times)


def group_rate(cfg: EvalConfig, cand: str, n: int, group: str = "", run_workers: int = 1, label: str = "") -> float:
    """Evaluations per minute of `n` distinct honest candidates of one task through an `Evaluator` with its
    defaults (what a GRPO group of one task asks of the harness), their builds cached beforehand; `group`:
    submitted as one group (`Evaluator.submit(..., group=)`: one reference's inputs and outputs). Also prints
    the spread of the group's speedups (the candidates differ in a comment only)."""
    from kernelbench.harness.evaluate import compile_stage

    batch = [fresh(cand) for _ in range(n)]
    for s in batch:
        compile_stage(TASK, s, cfg)  # warm build cache: the group's figure is the run stage's
    ev = Evaluator(cfg, run_workers=run_workers)
    try:
        t, out = wall(lambda: [f.result() for f in [ev.submit(TASK, s, group=group) for s in batch]])
    finally:
        ev.close()
    rate = 60 * n / t
    statuses = ",".join(sorted({r.status for r in out}))
    speedups = [r.speedup for r in out]
    spread = statistics.pstdev(speedups) / statistics.fmean(speedups) if statistics.fmean(speedups) else float("nan")
    row(f"group of {n}, {'warm workers' if cfg.warm_workers else 'fresh interpreters'}{', one group' if group else ''}"
        f"{f', {run_workers} run workers' if run_workers > 1 else ''}{f', {label}' if label else ''}", f"{rate:.1f} /min",
        f"{t:.1f} s; statuses {statuses}; speedups CV {100 * spread:.1f} %")
    return rate


BASELINE_COMMIT = "ab2c109"
"""The harness as the evaluation-speed work found it (2026-12-04): three fresh interpreters per evaluation, every
candidate computing its own reference. The group figure's "today" is this commit's code, measured in the same run
on the same machine, since the flag path (`warm_workers=False`) shares every later speed-up of the run stage."""

BASELINE_DRIVER = """
import json, sys, time
from kernelbench.executors.evaluator import Evaluator
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import compile_stage
from kernelbench.tasks.task import Task
spec = json.load(open(sys.argv[1]))
task = Task(id="bench/relu", level=1, name="relu", origin="bench", source=spec["task"])
cfg = EvalConfig(device=spec["device"], size=spec["size"], build_cache_dir=spec["cache"], static_checks=False)
for src in spec["batch"]:
    compile_stage(task, src, cfg)
ev = Evaluator(cfg)
t = time.perf_counter()
out = [f.result() for f in [ev.submit(task, src) for src in spec["batch"]]]
t = time.perf_counter() - t
ev.close()
import kernelbench
bad = [r.feedback for r in out if r.status != "correct"]
print(json.dumps({"seconds": t, "statuses": sorted({r.status for r in out}), "code": kernelbench.__file__,
                  "not_correct": bad[0][-600:] if bad else ""}))
"""


def baseline_group_rate(commit: str, device: str, cand: str, n: int) -> tuple[float, str]:
    """Evaluations per minute of `n` distinct candidates (as `group_rate`: builds cached first, an `Evaluator`
    with its defaults) through the harness of `commit`, unpacked from this checkout's history into a temporary
    folder and run in a process of its own; (0, why) when that cannot be done (no git, a shallow clone)."""
    folder = tempfile.mkdtemp(prefix="ka-bench-baseline-")
    os.chmod(folder, 0o755)  # the sandboxed children (slot uids) load the commit's code from here
    try:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], capture_output=True)
        if tar.returncode != 0:
            return 0.0, f"git archive {commit}: {tar.stderr.decode(errors='replace').strip()[:200]}"
        subprocess.run(["tar", "-x", "-C", folder], input=tar.stdout, check=True)
        spec = os.path.join(folder, "bench-spec.json")
        Path(spec).write_text(json.dumps({"task": TASK.source, "device": device, "size": "gpu" if device == "cuda" else "cpu",
                                          "cache": tempfile.mkdtemp(prefix="ka-bench-baseline-cache-"),
                                          "batch": [fresh(cand) for _ in range(n)]}))
        out = subprocess.run([sys.executable, "-c", BASELINE_DRIVER, spec], cwd=folder, capture_output=True, text=True,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        if out.returncode != 0:
            return 0.0, f"the baseline's run failed ({out.returncode}): {out.stderr.strip()[-300:]}"
        got = json.loads(out.stdout.strip().splitlines()[-1])
        if not got["code"].startswith(folder):  # an installed copy of this checkout answered instead
            return 0.0, f"the baseline's process imported {got['code']}, not the commit's code"
        if got["not_correct"]:  # an honest candidate judged otherwise: no figure to compare with
            return 0.0, f"the baseline judged an honest candidate {got['statuses']}: {got['not_correct']}"
        rate = 60 * n / got["seconds"]
        row(f"group of {n}, the harness of {commit}", f"{rate:.1f} /min",
            f"{got['seconds']:.1f} s; statuses {','.join(got['statuses'])}")
        return rate, ""
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pch_variants(cfg: EvalConfig, cand: str) -> None:
    o3 = fresh(cand, '["-O3"]')
    pch2_s, _ = wall(lambda: pch.ensure_pch(pch.pch_flags(o3)))
    row("  PCH for `-O3` alone (built on first use)", f"{pch2_s:.1f} s", "once per flag set")
    row("  cold compile stage with `-O3` alone", f"{evaluate(TASK, o3, cfg).compile_s:.1f} s")
    saved = os.environ.get("KERNEL_AGENT_PCH_DIR")
    with tempfile.TemporaryDirectory() as empty:  # a PCH folder with no PCH in it (a -D flag builds none)
        os.chmod(empty, 0o755)
        os.environ["KERNEL_AGENT_PCH_DIR"] = empty
        none = evaluate(TASK, fresh(cand, '["-O3", "-fopenmp", "-DKA_BENCH_NO_PCH"]'), cfg)
    if saved is None:
        del os.environ["KERNEL_AGENT_PCH_DIR"]
    else:
        os.environ["KERNEL_AGENT_PCH_DIR"] = saved
    row("  cold compile stage, gcc without a PCH (a -D flag)", f"{none.compile_s:.1f} s")


def stability(label: str, task: Task, src: str, cfg: EvalConfig, repeats: int) -> tuple[float, int]:
    """The same candidate evaluated `repeats` times (fresh reference and candidate children each time)."""
    evaluate(task, src, cfg)  # build outside the measured repeats
    speedups = [evaluate(task, src, cfg).speedup for _ in range(repeats)]
    mean = statistics.fmean(speedups)
    cv = statistics.pstdev(speedups) / mean if mean else float("nan")
    row(f"speedup of {label} over {repeats} evaluations", f"{mean:.3f}x")
    low, high = cv_interval(cv, repeats)
    row("  coefficient of variation", f"{100 * cv:.1f} %", f"90 % interval "
        f"{100 * low:.1f}-{100 * high:.1f} %")
    row("  each evaluation's speedup", " ".join(f"{x:.3f}" for x in speedups))
    return cv, repeats


def cv_interval(cv: float, n: int, level: float = 0.9) -> tuple[float, float]:
    """Where the true CV lies, at `level`, given `cv` (population standard deviation over mean) from `n`
    evaluations: n * cv^2 / CV^2 is chi-square with n - 1 degrees of freedom for normal speedups, and its
    quantiles come from the Wilson-Hilferty approximation (within 2 % of the exact factors for n >= 5).
    Why: 8 evaluations pin a CV down only to 0.75x-1.92x itself, so a figure near the target says little alone."""
    if n < 2 or not math.isfinite(cv):
        return float("nan"), float("nan")
    k, z = n - 1, statistics.NormalDist().inv_cdf((1 + level) / 2)

    def chi2(zq: float) -> float:
        return k * (1 - 2 / (9 * k) + zq * math.sqrt(2 / (9 * k))) ** 3

    return cv * math.sqrt(n / chi2(z)), cv * math.sqrt(n / chi2(-z))


def nvrtc_bench(cfg: EvalConfig) -> None:
    import importlib.util

    if importlib.util.find_spec("cupy") is None:
        row("NVRTC (cupy) compile", "cupy absent")
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from test_evaluate_cuda import NVRTC_RELU

    r = evaluate(TASK, NVRTC_RELU, cfg)
    row("NVRTC candidate: compile stage (import)", f"{r.compile_s:.2f} s", "< 1 s of NVRTC inside")
    row("NVRTC candidate: status / speedup", f"{r.status} / {r.speedup:.3f}x")


def throughput(cfg: EvalConfig, cand: str, n: int) -> None:
    """A batch of `n` never-built candidates through 1 and 2 workers: the compile stage alone (the compile
    pool, which is what more workers speed up) and whole evaluations (compile pool feeding the run stage)."""
    from concurrent.futures import ThreadPoolExecutor

    from kernelbench.harness.evaluate import compile_stage

    rates: dict[tuple[str, int], float] = {}
    for workers in (1, 2):
        batch = [fresh(cand) for _ in range(n)]
        jobs = max(1, (os.cpu_count() or 2) // workers)  # as Evaluator shares the cores between compiles
        with ThreadPoolExecutor(workers) as pool:
            t, out = wall(lambda: list(pool.map(lambda src: compile_stage(TASK, src, cfg, jobs), batch)))
        rates["compile", workers] = n / t
        row(f"compile stage alone, batch of {n}, {workers} worker(s)", f"{60 * n / t:.2f} /min",
            "built " + str(sum(1 for st in out if st.decided is None)))
    row("  throughput ratio 2 workers / 1 (compile-bound)", f"{rates['compile', 2] / rates['compile', 1]:.2f}x",
        ">= 1.6x")
    for workers in (1, 2):
        batch = [(TASK, fresh(cand)) for _ in range(n)]
        ev = Evaluator(replace(cfg, timing_trials=20), compile_workers=workers, run_workers=workers)
        t, out = wall(lambda: ev.evaluate_many(batch))
        ev.close()
        rates["whole", workers] = n / t
        row(f"whole evaluations, batch of {n}, {workers} worker(s) per stage", f"{60 * n / t:.2f} /min",
            "statuses " + ",".join(sorted({r.status for r in out})))
    # with one worker per stage the run stage already runs beside the compile on the second core, so on
    # 2 cores the whole-evaluation ratio is bounded by 2C / (C + R) (C, R: CPU seconds of each stage)
    row("  throughput ratio 2 workers / 1 (whole evaluations)", f"{rates['whole', 2] / rates['whole', 1]:.2f}x",
        "bounded by 2C/(C+R) on 2 cores")


def group_throughput(cfg: EvalConfig, cand: str, n: int) -> None:
    """`n` distinct honest candidates of one task (a GRPO group) through one `Evaluator` (its default workers:
    one run worker), each submitted twice: alone and under one `group=`, the two kinds interleaved so that the
    load of a shared machine, which drifts by tens of percent within minutes, weighs on both alike. The run
    stage is the bottleneck once the builds exist (made first, untimed: the candidates differ in Python only),
    so a kind's evaluations per minute are its count over the run-stage seconds it took (`run_s`, waiting for a
    shared reference included). On CPU with paired timing (the default: the group shares its inputs and
    outputs, each candidate keeps a reference child timed beside it) and with `timing_rounds=0` (one
    reference child for the whole group)."""
    from kernelbench.harness.evaluate import compile_stage

    batch = [f"# candidate {i} of one group\n{cand}" for i in range(n)]
    for src in batch:
        compile_stage(TASK, src, cfg)
    evaluate(TASK, batch[0], cfg)  # untimed: the warm worker and the page cache, paid by neither kind
    configs = [("default config", cfg)]
    if cfg.device == "cpu":
        configs = [("default (paired timing)", cfg), ("timing_rounds=0", replace(cfg, timing_rounds=0))]
    for label, c in configs:
        with Evaluator(c) as ev:
            kinds = [(group, ev.submit(TASK, src, group=group)) for src in batch for group in ("", "bench-group")]
            out = {group: [f.result() for g, f in kinds if g == group] for group in ("", "bench-group")}
            shared = ev.references.computed
        rates = {group: 60 * n / sum(r.run_s for r in results) for group, results in out.items()}
        for group, results in out.items():
            how = "one group" if group else "each alone"
            row(f"{label}: {n} candidates, {how}", f"{rates[group]:.2f} /min",
                f"run stage; statuses {','.join(sorted({r.status for r in results}))}")
        row("  ratio group / alone", f"{rates['bench-group'] / rates['']:.2f}x",
            f"{shared} reference(s) computed for the group")


if __name__ == "__main__":
    main()
