"""The kernel-optimization assistant: `kernel-agent optimize FILE` on the user's own module.

FILE is a KernelBench-format module (`Model`, `get_inputs`, `get_init_inputs`). The agent searches
(parallel or beam, see `agent.strategies`), the harness judges every kernel, and OUT gets:
- `best.py`: the fastest correct solution, runnable as is (absent when nothing was correct);
- `report.md` + `best_speedup.png`: every kernel tried with its status and speedup;
- `trajectories.jsonl`: every turn in full (a rerun with the same OUT resumes from it);
- `config.json`: the resolved settings.
"""

from __future__ import annotations

import json
import os
import platform
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import pydantic.dataclasses
import torch
from pydantic import ConfigDict, Field, field_validator, TypeAdapter, ValidationInfo
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent.backends import Backend, make_policy
from agent.episode import EpisodeRunner, SubmitsEvaluations
from agent.policy import Policy, SamplingConfig
from agent.prompts import PromptSettings
from agent.report import Best, write_report
from agent.strategies import search, SearchBudget, Strategy
from agent.trajectory import Trajectory, Turn
from kernelbench.executors.executor import ExecutorConfig, make_evaluator
from kernelbench.harness.config import Device, EvalConfig
from kernelbench.harness.result import CORRECT
from kernelbench.tasks.task import Task
from kernelbench.tasks.task_file import read_task_file
from rewards import ScoreConfig


@pydantic.dataclasses.dataclass(frozen=True, config=ConfigDict(extra="forbid", validate_default=True))
class OptimizeConfig:
    """Settings of one `kernel-agent optimize` run; validated on construction (docs/architecture.md,
    "Configuration") and saved as OUT/config.json (pydantic's JSON dump)."""

    file: str
    """The user's KernelBench-format module."""
    out: str = "optimize_out"
    """Output directory (created; a rerun with the same directory resumes)."""
    backend: Backend = "openai"
    """`hf`, `vllm` or `openai`."""
    model: str = ""
    """Model name (openai) or checkpoint path / hub name present locally (hf, vllm)."""
    base_url: str = ""
    """Chat-completions endpoint root for the openai backend, e.g. http://localhost:8000/v1."""
    device: Device = "cuda"
    """`cuda` (CUDA kernels, timed on the GPU) or `cpu` (C++ kernels, timed on one core)."""
    size: Literal["", "cpu", "gpu"] = ""
    """Task size: `cpu` or `gpu`; empty picks the one matching `device`."""
    strategy: Strategy = "parallel"
    """`parallel` (N x T) or `beam` (rounds of T turns, keep the best `beam_keep`, replicate to N)."""
    trajectories: int = Field(4, ge=1)
    """Parallel trajectories (N)."""
    turns: int = Field(4, ge=1)
    """Refinement turns per trajectory (T; per round for beam)."""
    streaming_turns: bool = True
    """A trajectory's next turn is generated as soon as its own verdict is back, batched with whatever else is
    ready (`agent.episode.EpisodeRunner`); False (`--lockstep-turns`): a task's trajectories advance turn by
    turn together, the earlier schedule."""
    rounds: int = Field(2, ge=1)
    """Beam search rounds."""
    beam_keep: int = Field(1, ge=1)
    """Beam search: trajectories kept after each round."""
    op_policy: Literal["", "strict", "partial"] = ""
    """`strict`, `partial`, or empty: the file's `OP_POLICY` constant, else `strict`."""
    sampling: SamplingConfig = field(default_factory=lambda: SamplingConfig(max_tokens=8192))
    """Sampling (`agent.policy.SamplingConfig`: temperature, top_p, max_tokens, seed)."""
    prompt: PromptSettings = field(default_factory=lambda: PromptSettings(hardware=""))
    """Prompt settings (`agent.prompts.PromptSettings`): `hardware` naming the target machine (empty: detected),
    `token_budget` (oldest attempts dropped first beyond it), `language`, `style`. `device` is this config's;
    `op_policy` is the task's."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Harness settings (`kernelbench.harness.config.EvalConfig`, e.g. `profile`); `device` and `size` are this
    config's (size resolved), `op_policy` the task's."""
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    """Where evaluations run (`kernelbench.executors.executor.ExecutorConfig`)."""
    price_in: float = Field(0.0, ge=0)
    """USD per million prompt tokens, for the session's cost in report.md (0 with price_out 0: tokens only)."""
    price_out: float = Field(0.0, ge=0)
    """USD per million completion tokens (reasoning included)."""

    @field_validator("prompt", "eval")
    @classmethod
    def _target_from_config(cls, value: Any, info: ValidationInfo) -> Any:
        """One place for the run's target: the nested settings take device and size from the fields above
        (validated before them; a nested value of its own is overwritten)."""
        if not {"device", "size"} <= info.data.keys():
            return value  # one of them failed: its own error says so
        if info.field_name == "prompt":
            return replace(value, device=info.data["device"])
        return replace(value, device=info.data["device"], size=info.data["size"] or
                       ("gpu" if info.data["device"] == "cuda" else "cpu"))


SCORING = ScoreConfig()
"""An optimize run's reward settings, which rank its trajectories (beam search keeps the best by score):
Kevin-32B's defaults, as `OptimizeConfig` has no reward settings of its own."""


@dataclass(frozen=True)
class OptimizeOutcome:
    best: Best | None
    trajectories: tuple[Trajectory, ...]
    out_dir: str


def describe_hardware(device: str) -> str:
    """What the kernels will run on, for the prompt: the GPU's name, or the CPU model."""
    if device == "cuda":
        try:
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
    os.makedirs(config.out, exist_ok=True)
    with open(os.path.join(config.out, "config.json"), "w", encoding="utf-8") as f:  # the resolved size: eval.size
        json.dump(TypeAdapter(OptimizeConfig).dump_python(config, mode="json"), f, indent=2)
    if policy is None:
        policy = make_policy(config.backend, config.model, base_url=config.base_url, device=config.device)
    own_evaluator = evaluator is None
    if own_evaluator:
        evaluator = make_evaluator(replace(config.eval, op_policy=task.op_policy), config.executor)
    hardware = config.prompt.hardware or describe_hardware(config.device)
    budget = SearchBudget(trajectories=config.trajectories, turns=config.turns,
                          rounds=config.rounds if config.strategy == "beam" else 1, keep=config.beam_keep)
    progress = _Progress(budget.trajectories * budget.turns * budget.rounds, console)
    runner = EpisodeRunner(
        policy, evaluator, turns=config.turns,
        sampling=config.sampling,
        prompt_settings=replace(config.prompt, hardware=hardware, op_policy=task.op_policy),
        score=SCORING.score, log_path=os.path.join(config.out, "trajectories.jsonl"), on_turn=progress.on_turn,
        streaming=config.streaming_turns)
    try:
        with progress.bar:
            trajs = search(runner, [task], config.strategy, budget)
    finally:
        if own_evaluator:
            evaluator.close()
    settings = {"file": config.file, "model": f"{config.backend}:{config.model}", "device": config.device,
                "size": config.eval.size, "hardware": hardware, "op policy": task.op_policy,
                "search": f"{config.strategy}, {config.trajectories} trajectories x {config.turns} turns"
                          + (f" x {budget.rounds} rounds (keep {budget.keep})" if config.strategy == "beam" else "")}
    best = write_report(config.out, f"kernel-agent optimize: {task.name}", trajs, settings,
                        price_in=config.price_in, price_out=config.price_out)
    best_path = os.path.join(config.out, "best.py")
    if best:
        with open(best_path, "w", encoding="utf-8") as f:
            f.write(f"# kernel-agent optimize: {best.speedup:.3f}x over the PyTorch reference on {hardware}\n"
                    f"# (trajectory {best.traj_id}, turn {best.turn.index + 1}; see report.md)\n")
            f.write(best.turn.candidate.rstrip() + "\n")
    elif os.path.exists(best_path):
        os.remove(best_path)  # a stale best.py from an earlier run with this OUT would mislead
    return OptimizeOutcome(best=best, trajectories=tuple(trajs), out_dir=config.out)
