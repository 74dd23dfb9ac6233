"""`kernel-agent train`: multi-turn GRPO (train/grpo.py), or the whole CPU pipeline (train/pipeline.py).

    kernel-agent train --preset cpu-tiny --steps 2 --out runs/rl          # needs `model:` (an SFT output)
    kernel-agent train --preset cpu-tiny --pipeline --out runs/cpu-tiny   # SFT -> RL -> bench -> report
    kernel-agent train --config configs/qwen3-8b-8gpu.yaml --resume
"""

from __future__ import annotations

import argparse

from cli.main import UsageError, add_executor_options


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
    add_executor_options(p, from_preset=True)
    p.add_argument("--pipeline", action="store_true",
                   help="run SFT warm start, RL, held-out bench and report into --out (cpu-tiny)")


def run(args: argparse.Namespace) -> int:
    from train.config import TrainConfig, load_config

    preset = args.config or args.preset
    if args.pipeline:
        from train.pipeline import run_pipeline

        try:
            run_pipeline(preset, out=args.out or "runs/pipeline", steps=args.steps, seed=args.seed)
        except (ValueError, FileNotFoundError) as e:
            raise UsageError(str(e)) from e
        return 0
    try:
        config = load_config(TrainConfig, preset, "train", {"steps": args.steps, "out": args.out, "model": args.model, "seed": args.seed,
                                                            "executor": args.executor, "ray_address": args.ray_address,
                                                            "max_in_flight": args.max_in_flight})
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(str(e)) from e
    from kernelbench.executor import EXECUTORS

    if config.executor not in EXECUTORS or config.max_in_flight < 0:
        raise UsageError(f"executor must be one of {', '.join(EXECUTORS)} (got {config.executor!r}) "
                         f"and max_in_flight >= 0 (got {config.max_in_flight})")
    if not config.model:
        from train.pipeline import ensure_warm_start

        config = ensure_warm_start(preset, config)
    from train.grpo import main

    main(config, resume=args.resume)
    return 0
