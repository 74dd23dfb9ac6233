"""Multi-turn GRPO with the kernel harness in the loop, on TRL's GRPOTrainer (Kevin-32B, arXiv 2507.11948).

    kernel-agent train --preset cpu-tiny --steps 8 --out runs/cpu-tiny-rl
    torchrun --nproc_per_node 2 -m cli.main train --preset cpu-tiny --steps 2 --out runs/ddp
    accelerate launch --config_file configs/accelerate/ddp.yaml -m cli.main train --preset qwen3-8b-8gpu

TRL's `GRPOTrainer` does the update, under accelerate (DDP, FSDP2, DeepSpeed ZeRO-3): the clipped
token loss (`loss_type` dr_grpo, `epsilon` / `epsilon_high`, `beta`), the optimizer and scheduler,
gradient clipping, checkpoints and resume, vLLM generation with weight sync, LoRA merge and the
importance-sampling correction. This module supplies what the recipe adds, as TRL's `rollout_func`:

- a step's batch holds `tasks_per_batch` tasks; TRL hands each task's prompt `num_generations` =
  trajectories × turns times in a row, and the rollout runs the project's multi-turn episodes
  (agent/episode.py, the real harness) for those N trajectories × T turns and returns one sample per
  turn in those slots: prompt = that turn's context, completion = its answer;
- each sample's reward is its turn's discounted return from `rewards/` (passed as the extra rollout
  field `turn_reward` and handed back by the pass-through reward function `turn_reward`), so TRL's
  group normalisation over the N×T samples is Kevin's per-task normalisation over all turns;
- a turn whose evaluation failed in the harness (`harness_error`) gets reward None: NaN in TRL, left out
  of its group's mean and std, advantage 0.

This file reads top to bottom: setup, then `main`. Its parts live beside it, one job each:
`train/trl_args.py` (our config as TRL's `GRPOConfig`, the batch shape), `train/multiturn_rollout.py` (the
rollout function and its metrics), `train/generation.py` (the policies a rollout samples from) and
`train/trainer.py` (the `GRPOTrainer` subclass and the per-step metrics callback).

TRL is touched through its public API only: `rollout_func` (which sees the prompts alone, so each dataset row's
prompt names its task: `task_prompt`), a reward function, `compute_loss` and callbacks. The project's metrics
travel in a `PendingMetrics` the rollout, the held-out evaluation and the loss hook record in, and that the
step callback adds to each log row's `logs`.

Steps: one step is one batch (one rollout), `grad_steps_per_batch` optimizer steps of TRL. Metrics,
checkpoints and `--resume` count in steps; TRL's checkpoint folders count optimizer steps.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import torch

from kernelbench.config_files import save_config
from kernelbench.executors.executor import make_evaluator
from kernelbench.tasks import catalog, splits
from kernelbench.tasks.task import Task
from train.config import TrainConfig, validate_train
from train.generation import generation_policy
from train.layout import check_launch, evaluation_gpus, launched_sharding, Layout, resolve as resolve_layout
from train.metrics_log import PendingMetrics
from train.multiturn_rollout import MultiTurnRollout, scoring_of, task_prompt
from train.precision import load_dtype
from train.rollout import HarnessRollout, ReusingEvaluator, Rollout
from train.saving import save_final
from train.trainer import make_callbacks, make_trainer_class
from train.trl_args import batch_shape, grpo_args, world_size_of_launch

# Imports inside functions: transformers, peft, datasets and accelerate (0.1-3 s each to import) load when training
# runs, not when this module is imported for its records and helpers.


@dataclass(frozen=True)
class TrainResult:
    out_dir: str
    steps_done: int
    final_dir: str
    wall_s: float


# ---------------------------------------------------------------- setup

def resolve_tasks(spec: str) -> list[Task]:
    """`ORIGIN[:SPLIT]` (e.g. `builtin:train`, `family:affine:heldout`) or comma-separated task ids of the
    built-in suite or of a task family."""

    if "/" in spec:
        return [catalog.find_task(t.strip(), catalog.family_of_id(t.strip()) or "builtin") for t in spec.split(",") if t.strip()]
    origin, _, split = spec.partition(":")
    if origin == "family":  # family:NAME[:SPLIT]
        name, _, split = split.partition(":")
        origin = f"family:{name}"
    return splits.select(catalog.load_tasks(origin), split or "all")


def with_layout(config: TrainConfig, layout: Layout) -> TrainConfig:
    """The run's evaluator settings from its layout: on CUDA with a local executor, one run worker per timing
    GPU, each run pinned to its GPU (`ExecutorConfig.gpus`, `EvalConfig.cuda_device`) and held machine-wide
    (every training process's evaluator shares the node's timing GPUs); a shared GPU flags every result."""
    if config.device != "cuda" or config.executor.kind != "local" or not layout.evaluate:
        return config
    gpus = evaluation_gpus(layout)
    return replace(config, executor=replace(config.executor, gpus=gpus, run_workers=len(gpus)),
                   eval=replace(config.eval, shared_gpu=layout.shared_timing))


def make_harness_rollout(config: TrainConfig, out_dir: str, rank: int = 0) -> Rollout:
    evaluator = make_evaluator(config.eval, config.executor)
    if config.reuse_identical_results:
        evaluator = ReusingEvaluator(evaluator, noisy_retries=config.noisy_retries)
    return HarnessRollout(evaluator=evaluator, trajectories=config.trajectories, turns=config.turns,
                          sampling=config.sampling, prompt_settings=config.prompt,
                          log_dir=os.path.join(out_dir, "trajectories"), score=scoring_of(config).score, rank=rank,
                          streaming=config.streaming_turns)


def task_dataset(tasks: Sequence[Task], tasks_per_batch: int) -> Any:
    """One row per task (repeated until the row count is a multiple of `tasks_per_batch`: TRL's sampler drops
    an incomplete batch, so fewer rows than a batch would yield no step at all). A batch may then hold a
    task twice; the rollout keeps the two as separate groups."""
    from datasets import Dataset

    reps = tasks_per_batch // math.gcd(len(tasks), tasks_per_batch)
    rows = [t for _ in range(reps) for t in tasks]
    return Dataset.from_list([{"prompt": task_prompt(t.id)} for t in rows])


def turn_reward(completions: list, turn_reward: list, **_: Any) -> list[float | None]:
    """Pass-through reward: each sample's discounted return, computed by the rollout (`rewards/`)."""
    return list(turn_reward)


# ---------------------------------------------------------------- main

def load_model(config: TrainConfig) -> tuple[Any, Any, Any]:
    """The policy, the trainer's tokenizer and the rollout's own tokenizer (see MultiTurnRollout)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # fp32 master weights for what trains (bf16 autocast does the arithmetic); a LoRA base stays as configured
    model = AutoModelForCausalLM.from_pretrained(config.model, dtype=load_dtype(config.dtype, config.lora_rank))
    toks = [AutoTokenizer.from_pretrained(config.model) for _ in range(2)]
    for tok in toks:
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
    return model, toks[0], toks[1]


def peft_config_of(config: TrainConfig) -> Any:
    if config.lora_rank <= 0:
        return None
    from peft import LoraConfig

    return LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, target_modules="all-linear",
                      task_type="CAUSAL_LM")


def latest_checkpoint(out_dir: str) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    path = os.path.join(out_dir, "checkpoints")
    return get_last_checkpoint(path) if os.path.isdir(path) else None


def main(config: TrainConfig, *, resume: bool = False, rollout: Rollout | None = None, say: Callable[[str], None] = print,
         trainer_hook: Callable[[Any], None] | None = None) -> TrainResult:
    """Train; `rollout` replaces the harness rollout (tests); `trainer_hook(trainer)` sees the trainer
    before training (tests)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    validate_train(config)
    t_start = time.perf_counter()
    out = config.out
    if config.torch_threads > 0:
        torch.set_num_threads(config.torch_threads)
    layout = resolve_layout(config)  # before anything loads: which GPUs train, generate and time (train.layout)
    check_launch(layout, world_size_of_launch(), launched_sharding())
    config = with_layout(config, layout)
    shape = batch_shape(config, world_size_of_launch())
    args = grpo_args(config, shape, out)  # initialises the process group under torchrun / accelerate
    from accelerate import PartialState

    state = PartialState()
    rank, is_main = state.process_index, state.is_main_process
    if state.num_processes != shape.world_size:
        raise RuntimeError(f"launched with WORLD_SIZE {shape.world_size} but got {state.num_processes} processes")
    if is_main:
        save_config(config, out, world_size=state.num_processes, trl_batch=shape.__dict__, layout=layout.to_dict())
    talk = say if is_main else (lambda _: None)
    model, tokenizer, rollout_tokenizer = load_model(config)
    tasks = resolve_tasks(config.tasks)
    rollout = rollout or make_harness_rollout(config, out, rank=rank)
    metrics = PendingMetrics()  # rollout, held-out eval and loss hook -> the step's log row (StepMetrics.on_log)
    rollout_func = MultiTurnRollout(config, rollout, tasks, rollout_tokenizer,
                                    openings_path=os.path.join(out, "openings.json"), metrics=metrics)
    eval_fn = HeldOutEval(config, rollout, rollout_tokenizer, metrics) if config.eval_every else None
    trainer = make_trainer_class()(model=model, reward_funcs=[turn_reward], args=args,
                                   train_dataset=task_dataset(tasks, config.tasks_per_batch),
                                   processing_class=tokenizer, rollout_func=rollout_func, metrics=metrics,
                                   peft_config=peft_config_of(config),
                                   callbacks=make_callbacks(config, out, eval_fn, metrics, say))
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # our callback prints one line per step
    if eval_fn is not None:
        eval_fn.trainer = trainer
    if trainer_hook:
        trainer_hook(trainer)
    checkpoint = latest_checkpoint(out) if resume else None
    if checkpoint:
        talk(f"resuming from {checkpoint}")
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        close = getattr(getattr(rollout, "evaluator", None), "close", None)
        if close:
            close()
    final = os.path.join(out, "final")
    save_final(trainer, tokenizer, final, config.lora_rank, config.lora_alpha)  # every rank: the gather is a collective
    done = trainer.state.global_step // config.grad_steps_per_batch
    talk(f"trained {done} steps -> {out}")
    return TrainResult(out_dir=out, steps_done=done, final_dir=final, wall_s=time.perf_counter() - t_start)


class HeldOutEval:
    """Held-out evaluation every `eval_every` steps (no update): mean best score and correct share of
    `eval_tasks` under the current weights, logged under `eval/` in that step's row. Every process takes
    an equal share of the tasks (generation under FSDP / ZeRO-3 and vLLM server mode are collective, so
    all processes must generate the same number of times); the results are gathered. `trainer` is set once
    the trainer exists (the trainer's callbacks hold this object before it does)."""

    def __init__(self, config: TrainConfig, rollout: Rollout, tokenizer: Any, metrics: PendingMetrics):
        self.config, self.rollout, self.tokenizer, self.metrics = config, rollout, tokenizer, metrics
        self.tasks = resolve_tasks(config.eval_tasks)[:config.eval_limit or None]
        self.trainer: Any = None

    def __call__(self, state: Any) -> None:
        from accelerate.utils import gather_object

        trainer = self.trainer
        if trainer is None or not self.tasks:
            return
        tasks = self.tasks
        world, rank = trainer.accelerator.num_processes, trainer.accelerator.process_index
        per_rank = max(1, len(tasks) // world)
        mine = [tasks[(rank * per_rank + i) % len(tasks)] for i in range(per_rank)]
        quiet = replace(self.rollout, log_dir="") if hasattr(self.rollout, "log_dir") else self.rollout
        with generation_policy(trainer, self.tokenizer, self.config.backend, training=False) as policy:
            trajs = quiet.collect(policy, mine, state.global_step, 7 + state.global_step + 1009 * rank)
        local = [HeldOutRow(best_score=t.best_score, correct=t.correct) for t in trajs]
        rows: list[HeldOutRow] = [r for part in gather_object([local]) for r in part] if world > 1 else local
        self.metrics.record("eval/best_score_mean", sum(r.best_score for r in rows) / max(1, len(rows)))
        self.metrics.record("eval/correct_share", sum(r.correct for r in rows) / max(1, len(rows)))


@dataclass(frozen=True)
class HeldOutRow:
    """One held-out trajectory as every process sends it to the others (`gather_object`)."""

    best_score: float
    """Its best turn's score under the run's reward settings."""
    correct: bool
    """Some turn of it was correct."""
