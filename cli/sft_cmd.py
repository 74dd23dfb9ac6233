"""`kernel-agent sft`: the supervised warm start (train/sft.py, TRL's SFTTrainer).

    kernel-agent sft --preset cpu-tiny --out runs/cpu-tiny-sft
    kernel-agent sft --model PATH --data runs/x/trajectories/step_000010.jsonl --min-speedup 1.0 --out DIR
"""

from __future__ import annotations

import argparse

from cli import checks
from cli.main import UsageError
from kernelbench.config_files import updated
from kernelbench.tasks.catalog import find_task
from kernelbench.tasks.task import OriginError

# Imports inside functions: each command loads what it needs when it runs: `kernel-agent --help`, a mistyped flag
# and `kernel-agent tasks` answer without torch.


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sft", help="warm-start a policy on solution trajectories (TRL SFTTrainer)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", help="preset file (YAML/JSON); its `sft:` section is used")
    src.add_argument("--preset", help="preset name under configs/ (e.g. cpu-tiny)")
    p.add_argument("--model", help="`tiny` or a local model folder")
    p.add_argument("--data", help="`solutions` or a trajectories.jsonl")
    p.add_argument("--tasks", help="comma-separated task ids (solutions data)")
    p.add_argument("--min-speedup", type=float, dest="min_speedup", help="trajectories: keep correct turns at least this fast")
    p.add_argument("--steps", type=int, dest="max_steps", help="most optimizer steps")
    p.add_argument("--lr", type=float, dest="learning_rate", help="learning rate")
    p.add_argument("--out", help="output folder")


def run(args: argparse.Namespace) -> int:
    from train.config import SFTConfig
    from train.presets import load_config
    from train.sft import main

    if args.config:
        checks.input_file(args.config, "--config")
    if args.data and args.data != "solutions":
        checks.input_file(args.data, "--data")
    checks.positive(args.max_steps, "--steps")
    checks.out_folder(args.out)
    if args.tasks:
        for task_id in (t.strip() for t in args.tasks.split(",") if t.strip()):
            try:
                find_task(task_id)
            except (OriginError, ValueError, KeyError, LookupError) as e:
                raise UsageError(f"--tasks: unknown task {task_id!r} ({' '.join(str(e).split())[:200]})") from None

    overrides = {k: getattr(args, k) for k in ("model", "data", "min_speedup", "max_steps", "learning_rate", "out")}
    if args.tasks:
        overrides["tasks"] = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    try:
        if args.config or args.preset:
            config = load_config(SFTConfig, args.config or args.preset, "sft", overrides)
        else:
            config = updated(SFTConfig(), overrides, "command line", "sft")
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(str(e)) from e
    except Exception as e:
        if type(e).__module__.split(".")[0] == "yaml":
            raise UsageError(f"{args.config or args.preset}: malformed YAML: {' '.join(str(e).split())}") from None
        raise
    main(config)
    return 0
