"""The kernel-optimization assistant: `kernel-agent optimize FILE` on the user's own module.

FILE is a KernelBench-format module (`Model`, `get_inputs`, `get_init_inputs`). The agent searches
(parallel or beam, see `agent.strategies`), the harness judges every kernel, and OUT gets:
- `best.py`: the fastest correct solution, runnable as is (absent when nothing was correct);
- `report.md` + `best_speedup.png`: every kernel tried with its status and speedup;
- `trajectories.jsonl`: every turn in full (a rerun with the same OUT resumes from it);
- `config.json`: the resolved settings.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
from collections import Counter
from dataclasses import dataclass
from typing import Any

from agent.episode import EpisodeRunner, SubmitsEvaluations, Trajectory, Turn
from agent.policy import Policy, SamplingConfig, make_policy
from agent.prompts import PromptSettings
from agent.report import Best, write_report
from agent.strategies import SearchBudget, search
from kernelbench.harness.result import CORRECT
from kernelbench.tasks.task import Task
from kernelbench.tasks.task_file import read_task_file


@dataclass(frozen=True)
class OptimizeConfig:
    """Settings of one `kernel-agent optimize` run."""

    file: str
    """The user's KernelBench-format module."""
    out: str = "optimize_out"
    """Output directory (created; a rerun with the same directory resumes)."""
    backend: str = "openai"
    """`hf`, `vllm` or `openai`."""
    model: str = ""
    """Model name (openai) or checkpoint path / hub name present locally (hf, vllm)."""
    base_url: str = ""
    """Chat-completions endpoint root for the openai backend, e.g. http://localhost:8000/v1."""
    device: str = "cuda"
    """`cuda` (CUDA kernels, timed on the GPU) or `cpu` (C++ kernels, timed on one core)."""
    size: str = ""
    """Task size: `cpu` or `gpu`; empty picks the one matching `device`."""
    language: str = ""
    """Kernel language the prompts ask for: `cuda`, `triton` or `cpp`; empty: the device's own (`cuda` on cuda,
    `cpp` on cpu). Triton kernels on `cpu` run under Triton's interpreter and are judged for correctness only
    (flag `interpreted`, no speedup: docs/harness.md)."""
    strategy: str = "parallel"
    """`parallel` (N x T) or `beam` (rounds of T turns, keep the best `beam_keep`, replicate to N)."""
    trajectories: int = 4
    turns: int = 4
    rounds: int = 2
    """Beam search rounds."""
    beam_keep: int = 1
    temperature: float = 0.9
    top_p: float = 1.0
    max_tokens: int = 8192
    seed: int = 0
    op_policy: str = ""
    """`strict`, `partial`, or empty: the file's `OP_POLICY` constant, else `strict`."""
    hardware: str = ""
    """Text naming the target machine for the prompt; empty detects it."""
    token_budget: int = 8192
    """Prompt token budget (oldest attempts are dropped first beyond it)."""
    compile_workers: int = 2
    """Compile workers (threads locally, CPU actors on Ray)."""
    run_workers: int = 1
    """Run workers (one per GPU: threads locally, GPU actors on Ray)."""
    executor: str = "local"
    """`local` (this machine) or `ray` (actors on a Ray cluster; see docs/cluster.md)."""
    ray_address: str = ""
    """Ray cluster to use with `executor: ray`: empty starts a local Ray, `auto` joins this machine's cluster."""
    max_in_flight: int = 0
    """Most unfinished evaluations at once; submitting more waits (0: no bound)."""
    price_in: float = 0.0
    """USD per million prompt tokens, for the session's cost in report.md (0 with price_out 0: tokens only)."""
    price_out: float = 0.0
    """USD per million completion tokens (reasoning included)."""
    profile: str = "torch"
    """`EvalConfig.profile`: profile correct kernels for the feedback (`torch`, `ncu`, `off`)."""


@dataclass(frozen=True)
class OptimizeOutcome:
    best: Best | None
    trajectories: tuple[Trajectory, ...]
    out_dir: str


def describe_hardware(device: str) -> str:
    """What the kernels will run on, for the prompt: the GPU's name, or the CPU model."""
    if device == "cuda":
        try:
            import torch

            if torch.cuda.is_available():
                return torch.cuda.get_device_name(0)
        except Exception:
            pass
        return "an NVIDIA GPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + " (one thread)"
    except OSError:
        pass
    return (platform.processor() or platform.machine() or "a CPU") + " (one thread)"


class _Progress:
    """Live line: kernels done, statuses so far, best speedup (rich)."""

    def __init__(self, total: int, console: Any = None):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=False)
        self.task = self.bar.add_task("starting", total=total)
        self.statuses: Counter[str] = Counter()
        self.best = 0.0

    def on_turn(self, task: Task, traj_id: str, turn: Turn) -> None:
        self.statuses[turn.result.status] += 1
        if turn.result.status == CORRECT:
            self.best = max(self.best, turn.result.speedup)
        seen = ", ".join(f"{s} {n}" for s, n in self.statuses.most_common())
        self.bar.update(self.task, advance=1,
                        description=f"turn {turn.index + 1} | {seen} | best {self.best:.2f}x")


def optimize(config: OptimizeConfig, *, policy: Policy | None = None, evaluator: SubmitsEvaluations | None = None,
             console: Any = None) -> OptimizeOutcome:
    """Run the search on `config.file` and write the outputs; raises TaskFileError for a bad FILE."""
    task = read_task_file(config.file, origin="user", level=0, op_policy=config.op_policy)
    size = config.size or ("gpu" if config.device == "cuda" else "cpu")
    os.makedirs(config.out, exist_ok=True)
    with open(os.path.join(config.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(dataclasses.asdict(config) | {"size": size}, f, indent=2)
    if policy is None:
        policy = make_policy(config.backend, config.model, base_url=config.base_url, device=config.device)
    own_evaluator = evaluator is None
    if own_evaluator:
        from kernelbench.harness.config import EvalConfig
        from kernelbench.executors.executor import make_evaluator

        evaluator = make_evaluator(EvalConfig(device=config.device, size=size, op_policy=task.op_policy,
                                              profile=config.profile),
                                   executor=config.executor, ray_address=config.ray_address,
                                   compile_workers=config.compile_workers, run_workers=config.run_workers,
                                   max_in_flight=config.max_in_flight)
    hardware = config.hardware or describe_hardware(config.device)
    budget = SearchBudget(trajectories=config.trajectories, turns=config.turns,
                          rounds=config.rounds if config.strategy == "beam" else 1, keep=config.beam_keep)
    progress = _Progress(budget.trajectories * budget.turns * budget.rounds, console)
    runner = EpisodeRunner(
        policy, evaluator, turns=config.turns,
        sampling=SamplingConfig(temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens,
                                seed=config.seed),
        prompt_settings=PromptSettings(device=config.device, hardware=hardware, op_policy=task.op_policy,
                                       token_budget=config.token_budget, language=config.language),
        log_path=os.path.join(config.out, "trajectories.jsonl"), on_turn=progress.on_turn)
    try:
        with progress.bar:
            trajs = search(runner, [task], config.strategy, budget)
    finally:
        if own_evaluator:
            evaluator.close()
    settings = {"file": config.file, "model": f"{config.backend}:{config.model}", "device": config.device,
                "size": size, "hardware": hardware, "op policy": task.op_policy,
                "search": f"{config.strategy}, {config.trajectories} trajectories x {config.turns} turns"
                          + (f" x {budget.rounds} rounds (keep {budget.keep})" if config.strategy == "beam" else "")}
    best = write_report(config.out, f"kernel-agent optimize: {task.name}", trajs, settings,
                        prices=(config.price_in, config.price_out))
    best_path = os.path.join(config.out, "best.py")
    if best:
        with open(best_path, "w", encoding="utf-8") as f:
            f.write(f"# kernel-agent optimize: {best.speedup:.3f}x over the PyTorch reference on {hardware}\n"
                    f"# (trajectory {best.traj_id}, turn {best.turn.index + 1}; see report.md)\n")
            f.write(best.turn.candidate.rstrip() + "\n")
    elif os.path.exists(best_path):
        os.remove(best_path)  # a stale best.py from an earlier run with this OUT would mislead
    return OptimizeOutcome(best=best, trajectories=tuple(trajs), out_dir=config.out)
