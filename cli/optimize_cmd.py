"""`kernel-agent optimize FILE`: search for a faster, correct kernel version of the user's module.

    kernel-agent optimize my_model.py --backend openai --base-url http://localhost:8000/v1 \\
        --model Qwen/Qwen3-8B --device cuda --trajectories 8 --turns 4 --out runs/my_model

Exit codes: 0 a correct kernel was found (OUT/best.py), 1 none was, 2 bad arguments or FILE, 3 the model
server failed, 4 the harness is broken (preflight or repeated harness errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from agent.backends import BACKENDS
from agent.openai_backend import OpenAIError
from agent.strategies import STRATEGIES
from cli import checks
from cli.bench_cmd import add_cost_options
from cli.eval_cmd import add_profile_option
from cli.main import add_executor_options, UsageError
from kernelbench.config_files import ConfigError, validate
from kernelbench.executors.executor import ExecutorConfig
from kernelbench.harness.config import EvalConfig
from kernelbench.tasks.task_file import read_task_file, TaskFileError

# Imports inside functions: each command loads what it needs when it runs: `kernel-agent --help`, a mistyped flag
# and `kernel-agent tasks` answer without torch.


def add_parser(sub) -> None:
    p = sub.add_parser("optimize", help="write a faster kernel version of your own KernelBench-format module",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", help="module defining Model, get_inputs and get_init_inputs")
    p.add_argument("--backend", choices=BACKENDS, default="openai")
    p.add_argument("--model", default="", help="model name (openai) or local checkpoint (hf, vllm)")
    p.add_argument("--base-url", default="",
                   help="chat-completions root for --backend openai, e.g. http://localhost:8000/v1")
    p.add_argument("--trajectories", type=int, default=4, help="parallel trajectories (N)")
    p.add_argument("--turns", type=int, default=4, help="refinement turns per trajectory (T; per round for beam)")
    p.add_argument("--lockstep-turns", action="store_true",
                   help="a task's trajectories advance turn by turn together (default: each trajectory's next turn "
                        "is generated as soon as its own kernel is judged)")
    p.add_argument("--strategy", choices=STRATEGIES, default="parallel")
    p.add_argument("--rounds", type=int, default=2, help="beam search rounds")
    p.add_argument("--beam-keep", type=int, default=1, help="beam search: trajectories kept after each round")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where the kernels run (default: cuda when torch sees a GPU, else cpu)")
    p.add_argument("--size", choices=("cpu", "gpu"), default="", help="input size (default: matches --device)")
    p.add_argument("--language", choices=("cuda", "triton", "cpp"), default="",
                   help="kernel language the prompts ask for (default: cuda on cuda, cpp on cpu; triton on cpu is "
                        "judged for correctness only)")
    p.add_argument("--op-policy", choices=("strict", "partial"), default="",
                   help="PyTorch ops allowed beside kernels? (default: the file's OP_POLICY, else strict)")
    p.add_argument("--out", default="optimize_out", help="output directory (a rerun resumes from it)")
    p.add_argument("--temperature", type=float, default=0.9)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=8192)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hardware", default="", help="target hardware named in the prompt (default: detected)")
    p.add_argument("--compile-workers", type=int, default=2, help="parallel compiles")
    p.add_argument("--run-workers", type=int, default=1, help="parallel run stages (one per GPU)")
    add_executor_options(p)

    add_cost_options(p)

    add_profile_option(p)


def run(args: argparse.Namespace) -> int:
    from agent.optimize import OptimizeConfig, optimize

    for name in ("max_tokens", "compile_workers", "run_workers"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.backend == "openai" and not args.base_url:
        raise UsageError("--backend openai needs --base-url")
    if args.backend in ("hf", "vllm") and not args.model:
        raise UsageError(f"--backend {args.backend} needs --model (a local checkpoint)")
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    try:  # the flags validated as a preset is (train.config.validate): a bad value names its key
        config = validate(OptimizeConfig, dict(
            file=args.file, out=args.out, backend=args.backend, model=args.model, base_url=args.base_url,
            device=args.device, size=args.size, strategy=args.strategy, trajectories=args.trajectories,
            turns=args.turns, rounds=args.rounds, streaming_turns=not args.lockstep_turns, beam_keep=args.beam_keep,
            op_policy=args.op_policy,
            sampling=dict(temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed),
            prompt=dict(hardware=args.hardware, language=args.language), eval=dict(profile=args.profile),
            executor=dict(kind=args.executor, ray_address=args.ray_address, compile_workers=args.compile_workers,
                          run_workers=args.run_workers, max_in_flight=args.max_in_flight),
            price_in=args.price_in, price_out=args.price_out), "command line", "optimize")
    except ConfigError as e:
        raise UsageError(str(e)) from None
    _check_before_work(args)
    try:
        outcome = optimize(config)
    except TaskFileError as e:
        raise UsageError(str(e)) from None
    except OpenAIError as e:  # the model server failed: not the same as "no correct kernel" (exit 1)
        sys.stderr.write(f"kernel-agent optimize: model server error: {' '.join(str(e).split())[:600]}\n")
        return 3
    if outcome.best is None:
        sys.stderr.write(f"kernel-agent optimize: no correct kernel found; see {outcome.out_dir}/report.md\n")
        return 1
    print(f"best: {outcome.best.speedup:.3f}x -> {outcome.out_dir}/best.py (report: {outcome.out_dir}/report.md)")
    from agent.report import speed_of_light

    if speed_of_light(outcome.best.turn.result):
        print(f"  speed of light: {speed_of_light(outcome.best.turn.result)}")
    return 0


def _check_before_work(args: argparse.Namespace) -> None:
    """FILE, --out, the device, the server URL and the harness, before any model call (cli.checks)."""

    checks.text_file(args.file, "FILE")
    try:
        read_task_file(args.file, origin="user", level=0, op_policy=args.op_policy)
    except TaskFileError as e:
        raise UsageError(str(e)) from None
    checks.out_folder(args.out)
    checks.device(args.device)
    checks.size_for(args.device, args.size or None)
    checks.language(args.device, args.language)
    checks.base_url(args.base_url)
    old = os.path.join(args.out, "config.json")
    if os.path.isfile(old):  # a rerun resumes from --out's log: only with the same model and backend
        try:
            with open(old, encoding="utf-8") as f:
                prev = json.load(f)
        except (OSError, ValueError):
            prev = {}
        changed = [k for k in ("backend", "model", "device") if k in prev and prev[k] != getattr(args, k)]
        if changed:
            raise UsageError(f"{args.out} holds a run with another {', '.join(changed)} "
                             f"({', '.join(f'{k}={prev[k]!r}' for k in changed)}): choose another --out")
    checks.run_preflight(EvalConfig(device=args.device, size=args.size or args.device.replace("cuda", "gpu")),
                         ExecutorConfig(kind=args.executor, ray_address=args.ray_address), say=print)
