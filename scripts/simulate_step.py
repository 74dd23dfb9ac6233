#!/usr/bin/env python3
"""Simulate training steps of a preset on a layout (`train/step_model.py`): step time, the training GPUs' idle
share, `perf/eval_wait_share`, and how busy the timing GPUs are.

    python3 scripts/simulate_step.py --config configs/qwen3-8b-8gpu.yaml --gpus 8 \
        --latencies configs/latency/h200-assumed.json --sweep
    python3 scripts/simulate_step.py --from-run runs/ddp          # a finished run: its own measured latencies,
                                                                # predicted against its measured step time

`--latencies FILE`: a JSON object with `train.step_model.Latencies`' fields (lists of seconds; an `about`
field says where the figures come from). `--from-run DIR`: the latencies measured by a run of this project
(compile and run seconds of every evaluation, each policy call's seconds and the update's, from
`DIR/trajectories/` and `DIR/metrics.jsonl`), its shape from `DIR/config.json`, and the measured step times
to compare with (steps after the first: the first includes start-up). `--sweep`: every split of the node's
GPUs between training and timing, and compile workers half, once and twice the preset's, marking those
that keep `eval_wait_share` under `--target`.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
from dataclasses import fields, replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from train.step_model import Latencies, StepShape, simulate_steps  # noqa: E402


def load_latencies(path: str) -> Latencies:
    data = json.load(open(path))
    known = {f.name for f in fields(Latencies)}
    unknown = set(data) - known - {"about"}
    if unknown:
        raise SystemExit(f"{path}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
    return Latencies(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known})


def shape_of_config(config, gpus: int, eval_gpus: int | None, compile_workers: int | None,
                    processes: int = 1) -> StepShape:
    from train.layout import resolve

    ex = config.executor
    if eval_gpus is not None and ex.kind != "ray":  # with Ray the timing GPUs are the pool's, not the node's
        config = replace(config, layout=replace(config.layout, eval_gpus=eval_gpus))
    cw = compile_workers or ex.compile_workers
    if config.device != "cuda":  # CPU: each rank's own run workers (timings must not collide within a rank)
        ranks = max(1, processes)
        return StepShape(ranks=ranks, tasks_per_rank=-(-config.tasks_per_batch // ranks), trajectories=config.trajectories,
                         turns=config.turns, compile_workers=cw, run_slots=ex.run_workers, shared_run=False,
                         streaming=config.streaming_turns)
    layout = resolve(config, gpus)
    ranks = layout.training_processes
    ray = ex.kind == "ray"
    slots = (eval_gpus or 0) if ray else len(layout.evaluate) * layout.nodes
    if slots <= 0:
        raise SystemExit("no timing GPU in this layout (with a Ray executor, say how many with --eval-gpus)")
    return StepShape(ranks=ranks, tasks_per_rank=-(-config.tasks_per_batch // ranks), trajectories=config.trajectories,
                     turns=config.turns, compile_workers=cw, run_slots=slots, shared_compile=ray, shared_run=True,
                     streaming=config.streaming_turns)


def from_run(run: str) -> tuple[StepShape, Latencies, list[float]]:
    """A finished run's shape, its measured latencies and its measured step times (steps after the first).

    With `reuse_identical_results` a kernel text a process's evaluator has seen is not evaluated again: each
    policy call's completions are sorted into novel texts (their compile and run seconds are the samples),
    repeats of a text first sent in the same call (they wait for it) and repeats of an earlier call's text
    (answered at once), in step order per process."""
    cfg = json.load(open(os.path.join(run, "config.json")))
    conf = cfg.get("config", cfg)
    world = int(cfg.get("world_size", 1))
    reuse = bool(conf.get("reuse_identical_results", False))
    compile_s, run_s, calls = [], [], {}
    n = fmt = no_run = novel = same_call = 0
    paths = sorted(glob.glob(os.path.join(run, "trajectories", "step_*.jsonl")))
    for rank in range(world):
        seen: set = set()
        mine = [p for p in paths if (os.path.basename(p)[:-6].partition("-")[2] or "0") == str(rank)]
        for path in mine:
            measured = not os.path.basename(path).startswith("step_000000")  # step 0 holds start-up
            by_call: dict = {}
            for line in open(path):
                traj = json.loads(line)
                for t in traj["turns"]:
                    by_call.setdefault((traj["task_id"], t["index"]), []).append(t)
            for (task_id, index), turns in sorted(by_call.items(), key=lambda kv: kv[0][1]):
                this_call: set = set()
                for t in turns:
                    res = t["result"]
                    key = (task_id, t["candidate"])
                    fresh = not reuse or (key not in seen and key not in this_call)
                    repeat_here = reuse and key in this_call and key not in seen
                    if res["status"] != "format_error":
                        this_call.add(key)
                    if not measured:
                        continue
                    n += 1
                    calls[(path, t["generate_s"])] = t["generate_s"]  # a call's time names it (streamed calls mix turns)
                    if res["status"] == "format_error":
                        fmt += 1
                    elif fresh:
                        novel += 1
                        compile_s.append(res.get("compile_s", 0.0))
                        if res.get("run_s", 0.0) > 0:
                            run_s.append(res["run_s"])
                        else:
                            no_run += 1
                    elif repeat_here:
                        same_call += 1
                seen |= this_call
    rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))][1:]
    if not rows or not compile_s:
        raise SystemExit(f"{run}: needs at least two steps with evaluations")
    updates = [r["perf/step_s"] - r["perf/rollout_s"] for r in rows if "perf/step_s" in r]
    evaluated = max(1, n - fmt)
    lat = Latencies(compile_s=tuple(compile_s), run_s=tuple(run_s) or (0.0,), generate_call_s=tuple(calls.values()),
                    update_s=tuple(updates) or (0.0,), format_error_share=fmt / max(1, n),
                    no_run_share=no_run / max(1, novel), novel_share=novel / evaluated,
                    same_call_share=same_call / evaluated)
    ex = conf.get("executor", {})
    shape = StepShape(ranks=world, tasks_per_rank=-(-conf["tasks_per_batch"] // world), trajectories=conf["trajectories"],
                      turns=conf["turns"], compile_workers=ex.get("compile_workers", 2), run_slots=ex.get("run_workers", 1),
                      shared_run=conf.get("device") == "cuda",
                      streaming=bool(conf.get("streaming_turns", False)))  # runs from before the setting were lockstep
    print(f"measured in {run}: {n} completions after step 0, {fmt} format errors, {novel} novel kernels "
          f"(compile {statistics.median(compile_s):.2f} s, run {statistics.median(run_s or [0.0]):.2f} s median), "
          f"{same_call} waiting on their call's twin, {evaluated - novel - same_call} answered from earlier calls; "
          f"{len(calls)} policy calls ({statistics.median(calls.values()):.2f} s median); update "
          f"{statistics.median(updates or [0.0]):.1f} s median")
    return shape, lat, [r["perf/step_s"] for r in rows if "perf/step_s" in r]


def summary(shape: StepShape, lat: Latencies, steps: int, seed: int) -> dict[str, float]:
    sims = simulate_steps(shape, lat, steps, seed)
    mean = lambda k: statistics.fmean(getattr(s, k) for s in sims)  # noqa: E731
    return {"step_s": mean("step_s"), "rollout_s": mean("rollout_s"), "generate_s": mean("generate_s"),
            "eval_wait_share": mean("eval_wait_share"), "train_gpu_idle_share": mean("train_gpu_idle_share"),
            "run_slot_busy_share": mean("run_slot_busy_share"), "evaluations": mean("evaluations")}


def show(label: str, shape: StepShape, s: dict[str, float]) -> None:
    print(f"{label}: {shape.ranks} rank(s) x {shape.tasks_per_rank} task(s) x {shape.trajectories} trajectories x "
          f"{shape.turns} turns{'' if shape.streaming else ' (lockstep)'}; compile workers {shape.compile_workers}{' (one pool)' if shape.shared_compile else ' per rank'}, "
          f"run slots {shape.run_slots}{' (shared)' if shape.shared_run else ' per rank'}")
    print(f"  step {s['step_s']:.1f} s (rollout {s['rollout_s']:.1f} s, generating {s['generate_s']:.1f} s); "
          f"eval_wait_share {s['eval_wait_share']:.2f}; training GPUs idle {s['train_gpu_idle_share']:.2f}; "
          f"run slots busy {s['run_slot_busy_share']:.2f}; {s['evaluations']:.0f} evaluations")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="", help="a preset name or YAML path")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node (default 8)")
    ap.add_argument("--latencies", default="", help="JSON of train.step_model.Latencies fields")
    ap.add_argument("--from-run", default="", help="a finished run's folder: its measured latencies and step times")
    ap.add_argument("--eval-gpus", type=int, default=None, help="override layout.eval_gpus (Ray: the pool's GPUs)")
    ap.add_argument("--compile-workers", type=int, default=None, help="override executor.compile_workers")
    ap.add_argument("--processes", type=int, default=1, help="a CPU preset's training processes (default 1)")
    ap.add_argument("--schedule", choices=("streaming", "lockstep"), default=None,
                    help="turns streamed or in lockstep, whatever the preset's streaming_turns says")
    ap.add_argument("--steps", type=int, default=200, help="simulated steps to average (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweep", action="store_true", help="every training/timing split, and half/once/twice the compile workers")
    ap.add_argument("--target", type=float, default=0.10, help="eval_wait_share the sweep looks for (default 0.10)")
    args = ap.parse_args(argv)

    if args.from_run:
        shape, lat, measured = from_run(args.from_run)
        s = summary(shape, lat, args.steps, args.seed)
        show(f"predicted ({args.from_run})", shape, s)
        if measured:
            m = statistics.fmean(measured)
            print(f"  measured step {m:.1f} s over {len(measured)} step(s); predicted/measured {s['step_s'] / m:.2f}")
        return 0
    if not (args.config and args.latencies):
        ap.error("give --config and --latencies, or --from-run")
    from train.config import TrainConfig
    from train.presets import load_config

    config = load_config(TrainConfig, args.config, "train")
    if args.schedule:
        config = replace(config, streaming_turns=args.schedule == "streaming")
    lat = load_latencies(args.latencies)
    shape = shape_of_config(config, args.gpus, args.eval_gpus, args.compile_workers, args.processes)
    where = f"{args.gpus} GPU(s)" if config.device == "cuda" else f"CPU, {shape.ranks} process(es)"
    show(f"{args.config} on {where}", shape, summary(shape, lat, args.steps, args.seed))
    if not args.sweep:
        return 0
    print(f"\nsweep (eval_wait_share under {args.target:.2f} marked *):")
    print(f"  {'train':>5} {'time':>4} {'compile':>7} {'step s':>8} {'wait':>6} {'idle':>6} {'timing busy':>11}")
    base_cw = shape.compile_workers
    for eval_gpus in range(1, args.gpus):
        for cw in sorted({max(1, base_cw // 2), base_cw, 2 * base_cw}):
            try:
                sh = shape_of_config(config, args.gpus, eval_gpus, cw, args.processes)
            except Exception as e:  # a split the layout refuses (e.g. no training GPU left)
                print(f"  {args.gpus - eval_gpus:>5} {eval_gpus:>4} {cw:>7}  refused: {str(e)[:60]}")
                continue
            s = summary(sh, lat, max(20, args.steps // 4), args.seed)
            mark = "*" if s["eval_wait_share"] < args.target else " "
            print(f"  {sh.ranks:>5} {eval_gpus:>4} {cw:>7} {s['step_s']:>8.0f} {s['eval_wait_share']:>6.2f} "
                  f"{s['train_gpu_idle_share']:>6.2f} {s['run_slot_busy_share']:>11.2f} {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
