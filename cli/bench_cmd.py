"""`kernel-agent bench`: benchmark a model on held-out tasks; compare runs; sweep test-time budgets.

    kernel-agent bench --tasks builtin:heldout --backend openai --base-url URL --model M \
        --trajectories 16 --turns 8 --device cuda --out runs/m            # writes results.jsonl, metrics.json, report.md
    kernel-agent bench --out runs/m --resume ...same options...           # continue a killed run
    kernel-agent bench --backend replay --from runs/m --out runs/m-h200   # re-evaluate its kernels, no model
    kernel-agent bench compare runs/a runs/b [--allow-mixed] [--out compare.md]
    kernel-agent bench sweep --trajectories-grid 1,2,4,8 --turns-grid 1,2,4 ...run options...
    kernel-agent bench sweep --from runs/m --trajectories-grid 1,2,4 --turns-grid 1,2,4

See docs/bench.md for the metrics and how `--tasks` parses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from cli import checks
from cli.checks import ServerError
from cli.eval_cmd import add_profile_option
from cli.main import add_executor_options, UsageError
from evals import sweep
from evals.compare import compare, CompareError
from evals.metrics import compute_metrics
from evals.report import summary_line, write_report
from evals.results_log import BenchError, ResultsLog
from evals.tracking import require_tracker, TrackerError

# Imports inside functions: each command loads what it needs when it runs: `kernel-agent --help`, a mistyped flag
# and `kernel-agent tasks` answer without torch.


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", default="builtin:heldout",
                   help="ORIGIN[:SPLIT][:level_N]: builtin, kernelbench:PATH or hf:NAME; split train|heldout|extra|all "
                        "(default heldout)")
    p.add_argument("--level", type=int, default=0, choices=(0, 1, 2, 3, 4), help="only this level")
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks (N >= 1; default all)")
    p.add_argument("--backend", default="openai", choices=("hf", "vllm", "openai", "replay"))
    p.add_argument("--model", default="", help="model name (openai) or path (hf, vllm)")
    p.add_argument("--base-url", default="", help="chat-completions endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--from", dest="from_dir", default="", help="replay: the run folder whose kernels to re-evaluate")
    p.add_argument("--trajectories", type=int, default=16, help="N trajectories per task (default 16)")
    p.add_argument("--turns", type=int, default=8, help="T turns per trajectory (default 8)")
    p.add_argument("--lockstep-turns", action="store_true",
                   help="a task's trajectories advance turn by turn together (default: each trajectory's next turn "
                        "is generated as soon as its own kernel is judged)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--size", default="", choices=("", "cpu", "gpu"), help="task size (default: gpu on cuda, cpu on cpu)")
    p.add_argument("--language", choices=("cuda", "triton", "cpp"), default="",
                   help="kernel language the prompts ask for (default: cuda on cuda, cpp on cpu; triton on cpu is "
                        "judged for correctness only)")
    p.add_argument("--out", default="runs/bench", help="output folder")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--temperature", type=float, default=0.9)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--op-policy", default="", choices=("", "strict", "partial"), help="default: each task's own")
    p.add_argument("--hardware", default="", help="hardware named in the prompt (default: the device name)")
    p.add_argument("--timing-trials", type=int, default=100)
    p.add_argument("--compile-workers", type=int, default=2)
    p.add_argument("--run-workers", type=int, default=1)
    p.add_argument("--build-cache", default="", help="build cache folder (default $KERNEL_AGENT_CACHE or ~/.cache)")
    add_executor_options(p)
    p.add_argument("--no-compile-baseline", action="store_true",
                   help="skip the torch.compile baseline (its first measurement compiles each task: slow)")
    p.add_argument("--refresh-baselines", action="store_true", help="measure the baselines again")
    p.add_argument("--baseline-cache", default="", help="baseline cache file (default ~/.cache/kernel-agent/baselines.json)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_cost_options(p)
    p.add_argument("--report-to", default="", choices=("", "wandb", "trackio"),
                   help="also send the metrics to this tracker (optional extra: pip install -e '.[wandb]')")

    add_profile_option(p)


def add_cost_options(p: argparse.ArgumentParser) -> None:
    """`--price-in` / `--price-out` (bench, optimize): what the model's tokens cost."""
    p.add_argument("--price-in", type=float, default=0.0, help="USD per million prompt tokens (API models)")
    p.add_argument("--price-out", type=float, default=0.0,
                   help="USD per million completion tokens, reasoning included (API models)")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="benchmark a model on held-out tasks; compare runs; sweep budgets")
    _add_run_options(parser)
    actions = parser.add_subparsers(dest="bench_action", metavar="[compare|sweep]")
    cmp_p = actions.add_parser("compare", help="side-by-side table of several runs")
    cmp_p.add_argument("dirs", nargs="+", help="run folders (each with metrics.json)")
    cmp_p.add_argument("--allow-mixed", action="store_true", help="compare runs measured on different hardware")
    cmp_p.add_argument("--out", dest="compare_out", default="compare.md", help="markdown table to write (and .json beside)")
    sweep_p = actions.add_parser("sweep", help="test-time scaling over trajectories x turns (one run, subsampled)")
    _add_run_options(sweep_p)
    sweep_p.add_argument("--trajectories-grid", default="1,2,4,8", help="n values (default 1,2,4,8)")
    sweep_p.add_argument("--turns-grid", default="1,2,4", help="t values (default 1,2,4)")


def config_from(args: argparse.Namespace, **changes):
    """The run's `BenchConfig`: the flags gathered into its fields and validated as a preset is
    (`train.config.validate`), so a bad value names its key; `changes` (a sweep's largest grid point) last."""
    from evals.runner import BenchConfig
    from kernelbench.config_files import ConfigError, validate

    checks.positive(args.limit, "--limit")
    values = dict(tasks=args.tasks, level=args.level, limit=args.limit or 0, backend=args.backend, model=args.model,
                  base_url=args.base_url, from_dir=args.from_dir, trajectories=args.trajectories, turns=args.turns,
                  streaming_turns=not args.lockstep_turns, device=args.device, size=args.size, out=args.out,
                  resume=args.resume, op_policy=args.op_policy,
                  sampling=dict(temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed),
                  prompt=dict(hardware=args.hardware, language=args.language),
                  eval=dict(timing_trials=args.timing_trials, build_cache_dir=args.build_cache, profile=args.profile),
                  executor=dict(kind=args.executor, ray_address=args.ray_address, compile_workers=args.compile_workers,
                                run_workers=args.run_workers, max_in_flight=args.max_in_flight),
                  compile_baseline=not args.no_compile_baseline, refresh_baselines=args.refresh_baselines,
                  baseline_cache=args.baseline_cache, price_in=args.price_in, price_out=args.price_out,
                  report_to=args.report_to)
    try:
        return validate(BenchConfig, {**values, **changes}, "command line", "bench")
    except ConfigError as e:
        raise UsageError(str(e)) from None


def check_before_work(cfg) -> None:
    """Everything that can be known wrong before baselines or model calls: the device, the output folder,
    the model server and model, then the harness preflight (cli.checks)."""

    if cfg.report_to:  # a tracker that is not installed is known at once

        try:
            require_tracker(cfg.report_to)
        except TrackerError as e:
            raise UsageError(str(e)) from None
    checks.device(cfg.device)
    checks.size_for(cfg.device, cfg.size or None)
    checks.language(cfg.device, cfg.prompt.language)
    checks.out_folder(cfg.out)
    if cfg.backend != "replay":
        if not cfg.model:
            raise UsageError(f"--backend {cfg.backend} needs --model")
        if cfg.backend == "openai":
            if not cfg.base_url:
                raise UsageError("--backend openai needs --base-url")
            checks.model_server(cfg.base_url, cfg.model)
    checks.run_preflight(cfg.eval, cfg.executor, say=None if getattr(cfg, "quiet", False) else print)


def _run(args: argparse.Namespace, **changes) -> int:
    from agent.openai_backend import OpenAIError
    from evals.runner import run_bench

    cfg = config_from(args, **changes)
    check_before_work(cfg)
    try:
        outcome = run_bench(cfg, progress=not args.quiet)
    except BenchError as e:
        raise UsageError(str(e)) from None
    except OpenAIError as e:  # one line naming the server problem, not a traceback (exit 3)
        raise ServerError(" ".join(str(e).split())[:600]) from None
    print(f"{summary_line(outcome.metrics)}")
    print(f"wrote {os.path.join(outcome.out_dir, 'results.jsonl')}, metrics.json, report.md "
          f"({outcome.new_kernels} kernels evaluated now)")
    return 0


def _compare(args: argparse.Namespace) -> int:
    try:
        compare(args.dirs, allow_mixed=args.allow_mixed, out=args.compare_out)
    except CompareError as e:
        raise UsageError(str(e)) from None
    print(f"wrote {args.compare_out}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    try:
        n_grid, t_grid = sweep.parse_grid(args.trajectories_grid), sweep.parse_grid(args.turns_grid)
    except ValueError as e:
        raise UsageError(str(e)) from None
    out = args.out
    if args.from_dir and args.backend != "replay":
        out = args.from_dir  # compute the grid from an existing run, no new kernels
    else:
        _run(args, trajectories=max(n_grid), turns=max(t_grid))
    try:
        records = ResultsLog(os.path.join(out, "results.jsonl")).read()
    except BenchError as e:
        raise UsageError(str(e)) from None
    if not records:
        raise UsageError(f"{out} holds no results.jsonl records")
    rows = sweep.write_sweep(out, records, n_grid, t_grid)
    metrics_path = os.path.join(out, "metrics.json")
    if os.path.exists(metrics_path):
        with open(metrics_path, encoding="utf-8") as f:
            metrics = json.load(f)
    else:
        metrics = compute_metrics(records)
    cfg = {}
    if os.path.exists(os.path.join(out, "config.json")):
        with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f).get("bench", {})
    write_report(out, metrics, records, cfg, extra_sections=[sweep.markdown(rows)])
    print(f"wrote {os.path.join(out, 'sweep.json')}, scaling.png and the sweep section of report.md")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.bench_action == "compare":
        return _compare(args)
    if args.bench_action == "sweep":
        return _sweep(args)
    return _run(args)
