"""`kernel-agent train`: multi-turn GRPO (train/grpo.py), or the whole CPU pipeline (jobs/pipeline.py).

    kernel-agent train --preset cpu-tiny --steps 2 --out runs/rl          # needs `model:` (an SFT output)
    kernel-agent train --preset cpu-tiny --pipeline --out runs/cpu-tiny   # SFT -> RL -> bench -> report
    kernel-agent train --config configs/qwen3-8b-8gpu.yaml --resume
"""

from __future__ import annotations

import argparse

from cli import checks
from cli.main import add_executor_options, UsageError
from evals.tracking import require_tracker, TrackerError

# Imports inside functions: each command loads what it needs when it runs: `kernel-agent --help`, a mistyped flag
# and `kernel-agent tasks` answer without torch.


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="multi-turn GRPO with the harness in the loop")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="preset file (YAML/JSON); its `train:` section is used")
    src.add_argument("--preset", help="preset name under configs/ (cpu-tiny, qwen3-8b-8gpu, qwq-32b-multinode)")
    p.add_argument("--steps", type=int, help="training steps (overrides the preset)")
    p.add_argument("--out", help="output folder (overrides the preset)")
    p.add_argument("--model", help="policy to start from (overrides the preset)")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    p.add_argument("--seed", type=int, help="seed of data order, sampling and the update (overrides the preset)")
    p.add_argument("--language", choices=("cuda", "triton", "cpp"), default=None,
                   help="kernel language the prompts ask for (overrides the preset; default: cuda on cuda, cpp on cpu; triton on cpu is "
                        "judged for correctness only)")
    add_executor_options(p, from_preset=True)
    p.add_argument("--report-to", choices=("wandb", "trackio"), default=None,
                   help="also send the metrics to this tracker (optional extra; overrides the preset's trackers)")
    p.add_argument("--pipeline", action="store_true",
                   help="run SFT warm start, RL, held-out bench and report into --out (cpu-tiny)")
    p.add_argument("--plan", action="store_true",
                   help="print the run's GPU layout, per-GPU memory estimate and evaluation demand, then exit "
                        "(no GPU needed; exit 2 when it cannot run, naming the setting)")
    p.add_argument("--gpus", type=int, help="GPUs per node to plan or lay out for (overrides layout.gpus_per_node)")


def _load(kind, preset: str, section: str, overrides: dict | None = None):
    """A config section with the flags given laid over it (None: not given; `train.config.updated`), every way
    a preset file or a flag can be wrong turned into one line naming the file or flag's key."""
    from train.presets import load_config

    try:
        return load_config(kind, preset, section, overrides or {})
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(str(e)) from None
    except Exception as e:
        if type(e).__module__.split(".")[0] == "yaml":  # malformed YAML: where, not a traceback
            raise UsageError(f"{preset}: malformed YAML: {' '.join(str(e).split())}") from None
        raise


def preflight_of(config) -> None:
    """The harness preflight with the run's harness and executor settings (before the warm start or any
    model work)."""

    checks.device(config.device)
    checks.run_preflight(config.eval, config.executor, say=print)


def plan_of(config) -> int:
    """`--plan`: print the plan; a layout that cannot exist or a plan that does not fit is a usage error."""
    from train.layout import LayoutError
    from train.plan import plan

    try:
        problems = plan(config)
    except (LayoutError, ValueError) as e:
        raise UsageError(f"plan: {e}") from None
    if problems:
        raise UsageError("plan: this run cannot start as configured:\n  " + "\n  ".join(problems))
    print("plan: fits")
    return 0


def run(args: argparse.Namespace) -> int:
    from train.config import TrainConfig

    preset = args.config or args.preset
    if args.config:
        checks.input_file(args.config, "--config")
    checks.positive(args.steps, "--steps")
    checks.out_folder(args.out)
    if args.pipeline:
        from jobs.pipeline import run_pipeline

        preflight_of(_load(TrainConfig, preset, "train", {"steps": args.steps}))
        try:
            run_pipeline(preset, out=args.out or "runs/pipeline", steps=args.steps, seed=args.seed)
        except (ValueError, FileNotFoundError) as e:
            raise UsageError(str(e)) from e
        return 0
    checks.positive(args.gpus, "--gpus")
    config = _load(TrainConfig, preset, "train", {"steps": args.steps, "out": args.out, "model": args.model, "seed": args.seed,
                                                  "executor": {"kind": args.executor, "ray_address": args.ray_address,
                                                               "max_in_flight": args.max_in_flight},
                                                  "prompt": {"language": args.language},
                                                  "layout": {"gpus_per_node": args.gpus or None},
                                                  "trackers": [args.report_to] if args.report_to else None})
    if args.plan:
        return plan_of(config)

    try:
        for name in config.trackers:
            require_tracker(name)
    except TrackerError as e:
        raise UsageError(str(e)) from None
    checks.positive(config.steps, "steps")
    checks.out_folder(config.out, "out")
    checks.language(config.device, config.prompt.language)
    preflight_of(config)
    if not config.model:
        from train.warm_start import ensure_warm_start

        config = ensure_warm_start(preset, config)
    from train.grpo import main

    main(config, resume=args.resume)
    return 0
