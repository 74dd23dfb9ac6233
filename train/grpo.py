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

Steps: one step is one batch (one rollout), `grad_steps_per_batch` optimizer steps of TRL. Metrics,
checkpoints and `--resume` count in steps; TRL's checkpoint folders count optimizer steps.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import torch

from agent.episode import Trajectory
from kernelbench.tasks.task import Task
from train.config import TrainConfig, save_config, to_dict, validate_train
from train.metrics_log import MetricsLogger, departing_share, repetition_rate, usual_openings
from train.samples import TurnSample, build_samples

TRL_RENAMES = {"loss": "loss/policy", "grad_norm": "loss/grad_norm", "learning_rate": "loss/lr",
               "entropy": "loss/entropy", "kl": "loss/kl", "reward": "reward/trl_mean_return",
               "reward_std": "reward/trl_return_std", "frac_reward_zero_std": "rollout/zero_std_group_share_trl"}
"""TRL's log keys in our namespaces (STYLE.md); every other TRL key is kept under `trl/`."""


@dataclass(frozen=True)
class TrainResult:
    out_dir: str
    steps_done: int
    final_dir: str
    wall_s: float


# ---------------------------------------------------------------- setup

def resolve_tasks(spec: str) -> list[Task]:
    """`ORIGIN[:SPLIT]` (e.g. `builtin:train`) or comma-separated task ids of the built-in suite."""
    from kernelbench.tasks import catalog, splits

    if "/" in spec:
        return [catalog.find_task(t.strip(), "builtin") for t in spec.split(",") if t.strip()]
    origin, _, split = spec.partition(":")
    return splits.select(catalog.load_tasks(origin), split or "all")


def eval_config_of(config: TrainConfig) -> Any:
    """The harness settings of a training run (also used to pre-build its reference solutions)."""
    from kernelbench.harness.config import EvalConfig

    return EvalConfig(device=config.device, size=config.eval_size, timing_trials=config.eval_timing_trials,
                      correctness_trials=config.eval_correctness_trials, warmup_trials=config.eval_warmup_trials,
                      extra_distribution_trials=config.eval_extra_distribution_trials,
                      build_cache_dir=config.build_cache_dir)


def prompt_settings_of(config: TrainConfig) -> Any:
    from agent.prompts import PromptSettings

    return PromptSettings(device=config.device, hardware=config.hardware, token_budget=config.prompt_token_budget,
                          style=config.prompt_style, language=config.language)


def scoring_of(config: TrainConfig) -> Any:
    """The run's reward settings: verdict -> score (never the harness's own number)."""
    from rewards import ScoreConfig

    return ScoreConfig(correctness_weight=config.correctness_weight)


def make_harness_rollout(config: TrainConfig, out_dir: str, rank: int = 0):
    from agent.policy import SamplingConfig
    from kernelbench.executors.executor import make_evaluator
    from train.rollout import HarnessRollout, ReusingEvaluator

    evaluator = make_evaluator(eval_config_of(config), executor=config.executor, ray_address=config.ray_address,
                               compile_workers=config.compile_workers, run_workers=config.run_workers,
                               max_in_flight=config.max_in_flight)
    if config.reuse_identical_results:
        evaluator = ReusingEvaluator(evaluator)
    sampling = SamplingConfig(temperature=config.temperature, max_tokens=config.max_new_tokens)
    return HarnessRollout(evaluator=evaluator, trajectories=config.trajectories, turns=config.turns,
                          sampling=sampling, prompt_settings=prompt_settings_of(config),
                          log_dir=os.path.join(out_dir, "trajectories"), score=scoring_of(config).score, rank=rank)


@dataclass(frozen=True)
class BatchShape:
    """How a step's batch maps onto TRL's batch settings on `world_size` processes."""

    world_size: int
    tasks_per_rank: int
    samples_per_rank: int
    """tasks_per_rank × trajectories × turns: the rank's generation batch."""
    per_device_batch: int
    """TRL `per_device_train_batch_size` (= micro_batch_size)."""
    grad_accumulation: int
    """TRL `gradient_accumulation_steps`: micro-batches per optimizer step."""
    steps_per_generation: int
    """TRL `steps_per_generation` = grad_steps_per_batch × grad_accumulation."""


def batch_shape(config: TrainConfig, world_size: int) -> BatchShape:
    """TRL's batch settings for one step = one batch of `tasks_per_batch` tasks, split evenly over the ranks
    into whole groups (TRL checks divisibility by `num_generations` but not that a group stays on one rank)."""
    if config.tasks_per_batch % world_size:
        raise ValueError(f"tasks_per_batch ({config.tasks_per_batch}) must be a multiple of the number of "
                         f"processes ({world_size}): each process rolls out whole tasks")
    tasks_per_rank = config.tasks_per_batch // world_size
    samples = tasks_per_rank * config.samples_per_task
    per_step, rest = divmod(samples, config.grad_steps_per_batch)
    if rest or per_step % config.micro_batch_size:
        raise ValueError(f"a process's {samples} samples per batch ({tasks_per_rank} tasks × {config.trajectories} "
                         f"trajectories × {config.turns} turns) must split into grad_steps_per_batch "
                         f"({config.grad_steps_per_batch}) mini-batches of whole micro-batches "
                         f"(micro_batch_size {config.micro_batch_size})")
    ga = per_step // config.micro_batch_size
    return BatchShape(world_size=world_size, tasks_per_rank=tasks_per_rank, samples_per_rank=samples,
                      per_device_batch=config.micro_batch_size, grad_accumulation=ga,
                      steps_per_generation=config.grad_steps_per_batch * ga)


def world_size_of_launch() -> int:
    """Processes of this launch (torchrun / accelerate set WORLD_SIZE; a plain run is 1)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def grpo_args(config: TrainConfig, shape: BatchShape, out_dir: str) -> Any:
    """Kevin-32B's settings (our documented config) as TRL's `GRPOConfig`."""
    from trl import GRPOConfig

    return GRPOConfig(**grpo_kwargs(config, shape, out_dir))


def grpo_kwargs(config: TrainConfig, shape: BatchShape, out_dir: str) -> dict[str, Any]:
    """The keyword arguments of `grpo_args` (checkable without building the config, which on a CPU-only
    machine refuses GPU settings such as bf16)."""
    on_cpu = config.device == "cpu"
    g = config.grad_steps_per_batch
    return dict(
        output_dir=os.path.join(out_dir, "checkpoints"),
        # --- the update (Kevin-32B)
        loss_type=config.loss_norm, epsilon=config.eps_low, epsilon_high=config.eps_high, beta=config.kl_coef,
        max_grad_norm=config.grad_clip, learning_rate=config.learning_rate,
        warmup_steps=math.ceil(config.warmup_ratio * config.steps * g),
        lr_scheduler_type="constant_with_warmup", weight_decay=config.weight_decay,
        optim="adamw_torch" if config.optimizer == "adamw" else "sgd", num_iterations=config.iterations_per_batch,
        scale_rewards="group" if config.advantage_scale == "std" else "none",
        # --- batch: one step = one rollout of tasks_per_batch × N × T samples = g optimizer steps
        num_generations=config.samples_per_task, per_device_train_batch_size=shape.per_device_batch,
        gradient_accumulation_steps=shape.grad_accumulation, steps_per_generation=shape.steps_per_generation,
        max_steps=config.steps * g, max_completion_length=config.max_new_tokens, temperature=config.temperature,
        top_p=1.0, top_k=0, shuffle_dataset=True, seed=config.seed, data_seed=config.seed,
        # --- generation
        use_vllm=config.backend == "vllm", vllm_mode=config.vllm_mode,
        vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
        vllm_enable_sleep_mode=config.vllm_enable_sleep_mode and config.vllm_mode == "colocate",
        vllm_tensor_parallel_size=config.vllm_tensor_parallel_size, vllm_server_host=config.vllm_server_host,
        vllm_server_port=config.vllm_server_port, vllm_importance_sampling_mode=config.is_mode,
        vllm_importance_sampling_clip_max=config.is_cap,
        # --- device and precision (TRL's bf16 and gradient-checkpointing defaults are wrong on CPU)
        use_cpu=on_cpu, bf16=config.dtype == "bfloat16" and not on_cpu, gradient_checkpointing=config.gradient_checkpointing,
        ddp_backend="gloo" if on_cpu and shape.world_size > 1 else None,
        # --- logging and checkpoints: once per step; our callback writes metrics.jsonl and TensorBoard
        logging_steps=g, report_to="none", save_strategy="steps", save_steps=config.checkpoint_every * g,
        save_total_limit=config.keep_checkpoints, log_completions=False, disable_tqdm=True,
        dataloader_num_workers=0,
    )


def task_dataset(tasks: Sequence[Task], tasks_per_batch: int) -> Any:
    """One row per task (repeated until the row count is a multiple of `tasks_per_batch`: TRL's sampler drops
    an incomplete batch, so fewer rows than a batch would yield no step at all). A batch may then hold a
    task twice; the rollout keeps the two as separate groups."""
    from datasets import Dataset

    reps = tasks_per_batch // math.gcd(len(tasks), tasks_per_batch)
    rows = [t for _ in range(reps) for t in tasks]
    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"Optimise task {t.id}."}], "task_id": t.id}
                              for t in rows])


def turn_reward(completions: list, turn_reward: list, **_: Any) -> list[float | None]:
    """Pass-through reward: each sample's discounted return, computed by the rollout (`rewards/`)."""
    return list(turn_reward)


# ---------------------------------------------------------------- generation policies

def chat_ids(tokenizer: Any, conversation: Any) -> list[int]:
    """Token ids of a conversation rendered with the chat template and the assistant header, as the hf
    backend encodes them (the template as text, then tokenised without special tokens)."""
    text = tokenizer.apply_chat_template(list(conversation), add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class TRLVLLMPolicy:
    """`agent.policy.Policy` over TRL's vLLM integration (colocate or server): TRL syncs the trainer's weights
    into vLLM before each rollout (LoRA merged first, prefix cache reset). Every rank must make the same
    number of calls (server mode gathers prompts across ranks): each rank rolls out as many tasks."""

    def __init__(self, trainer: Any, tokenizer: Any):
        self.trainer, self.tokenizer = trainer, tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, prompts: list, sampling: Any) -> list:
        from agent.policy import Completion

        t0 = time.perf_counter()
        ids = [chat_ids(self.tokenizer, p) for p in prompts]
        _, completion_ids, logprobs, _ = self.trainer.vllm_generation.generate(ids, None, 1)
        elapsed = time.perf_counter() - t0
        eos = self.tokenizer.eos_token_id
        return [Completion(text=self.tokenizer.decode(c, skip_special_tokens=True), token_ids=tuple(c),
                           logprobs=tuple(float(lp[0]) if lp and lp[0] is not None else float("nan") for lp in lps),
                           prompt_token_ids=tuple(p), finish_reason="stop" if c and c[-1] == eos else "length",
                           generate_s=elapsed)
                for p, c, lps in zip(ids, completion_ids, logprobs)]


@contextlib.contextmanager
def generation_policy(trainer: Any, tokenizer: Any, backend: str):
    """The policy a rollout samples from: the trainer's current weights (transformers `generate`, unwrapped
    from DDP/FSDP/ZeRO-3) or TRL's vLLM engine."""
    if backend == "vllm":
        yield TRLVLLMPolicy(trainer, tokenizer)
        return
    from agent.hf_backend import HFPolicy
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                     gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs) as model:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                yield HFPolicy(model, tokenizer)
        finally:
            model.train(was_training)


# ---------------------------------------------------------------- the rollout function

class MultiTurnRollout:
    """TRL's `rollout_func`: the batch's tasks → multi-turn episodes → one sample per turn, in TRL's slots.

    Owns its own tokenizer: the trainer's fast tokenizer must never be shared with another thread (the
    evaluator's callbacks, an overlapped rollout): a Rust tokenizer used by two threads at once fails with
    "Already borrowed".
    """

    def __init__(self, config: TrainConfig, rollout: Any, tasks: Sequence[Task], tokenizer: Any, *,
                 openings_path: str = ""):
        self.config, self.rollout, self.tokenizer = config, rollout, tokenizer
        self.tasks = {t.id: t for t in tasks}
        self.scoring = scoring_of(config)
        self.openings_path = openings_path
        self.openings: tuple[str, ...] = ()
        if openings_path and os.path.exists(openings_path):
            self.openings = tuple(json.loads(open(openings_path, encoding="utf-8").read()))
        self.last_samples: list[list[TurnSample]] = []

    def encode_prompt(self, conversation: Any) -> list[int]:
        return chat_ids(self.tokenizer, conversation)

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        inputs = getattr(trainer, "rollout_inputs", None)
        if inputs is None or len(inputs) != len(prompts):
            raise RuntimeError("the trainer did not pass the batch's task ids (use KernelGRPOTrainer)")
        g = self.config.samples_per_task
        ids = [x["task_id"] for x in inputs]
        if len(ids) % g or any(len(set(ids[i:i + g])) != 1 for i in range(0, len(ids), g)):
            raise RuntimeError(f"batch does not come in blocks of {g} identical tasks: {ids}")
        tasks = [self.tasks[ids[i]] for i in range(0, len(ids), g)]
        step = trainer.state.global_step // self.config.grad_steps_per_batch
        rank = trainer.accelerator.process_index
        seed = self.config.seed * 1_000_003 + step * 10_007 + rank * 104_729
        t0 = time.perf_counter()
        with generation_policy(trainer, self.tokenizer, self.config.backend) as policy:
            trajs = self.rollout.collect(policy, tasks, step, seed)
        wall_s = time.perf_counter() - t0
        n = self.config.trajectories
        groups = [trajs[k * n:(k + 1) * n] for k in range(len(tasks))]
        samples = build_samples(groups, self.encode_prompt, scoring=self.scoring, gamma=self.config.gamma,
                                return_mode=self.config.return_mode)
        self.last_samples = samples
        out = self.to_trl(samples, g)
        self.log_metrics(trainer, samples, trajs, wall_s)
        return out

    def to_trl(self, groups: list[list[TurnSample]], g: int) -> dict[str, list]:
        """Rows in TRL's slot order; a group with fewer than `g` turns (an episode ended early, a turn
        without tokens) is filled with one-token end-of-sequence samples of reward None and env_mask 0
        (TRL reads every completion's last token, so none may be empty)."""
        eos = self.tokenizer.eos_token_id
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "turn_reward": [], "env_mask": []}
        filled = False
        for samples in groups:
            real = [s for s in samples if s.completion_ids][:g]
            for s in real:
                out["prompt_ids"].append(list(s.prompt_ids))
                out["completion_ids"].append(list(s.completion_ids))
                lps = list(s.logprobs) if len(s.logprobs) == len(s.completion_ids) else [0.0] * len(s.completion_ids)
                out["logprobs"].append(lps)
                out["turn_reward"].append(s.reward)
                out["env_mask"].append([1] * len(s.completion_ids))
            for _ in range(g - len(real)):
                filled = True
                out["prompt_ids"].append(list(real[0].prompt_ids) if real else [eos])
                out["completion_ids"].append([eos])
                out["logprobs"].append([0.0])
                out["turn_reward"].append(None)
                out["env_mask"].append([0])
        if not filled:
            del out["env_mask"]  # without fillers TRL counts completion lengths itself
        return out

    def log_metrics(self, trainer: Any, groups: list[list[TurnSample]], trajs: list[Trajectory], wall_s: float) -> None:
        """reward/, rollout/ and perf/ of this batch over every rank (gathered), into TRL's step metrics."""
        from accelerate.utils import gather_object

        samples = [s for grp in groups for s in grp]
        # Every turn carries the wall time of the batched call that produced it: count each call once.
        gen_s = sum(v for _, v in {(t.index, t.generate_s) for tr in trajs for t in tr.new_turns})
        evaluator = getattr(self.rollout, "evaluator", None)
        local = {"samples": [(s.score, s.reward, s.advantage, s.status, s.turn_index, len(s.completion_ids),
                              s.finish_reason, s.response, repetition_rate(s.completion_ids)) for s in samples],
                 "groups": [[s.reward for s in grp if s.reward is not None] for grp in groups],
                 "best": [t.best_score for t in trajs], "wall_s": wall_s, "gen_s": gen_s,
                 "reused": getattr(evaluator, "reused", 0), "submitted": getattr(evaluator, "submitted", 0)}
        every = gather_object([local]) if trainer.accelerator.num_processes > 1 else [local]
        rows = [r for part in every for r in part["samples"]]
        if not self.openings:
            self.openings = usual_openings(r[7] for r in rows)
            if self.openings_path and trainer.accelerator.is_main_process:
                with open(self.openings_path, "w", encoding="utf-8") as f:
                    json.dump(list(self.openings), f)
        metrics = rollout_metrics(rows, [g for part in every for g in part["groups"]],
                                  [b for part in every for b in part["best"]], self.openings)
        walls = [part["wall_s"] for part in every]
        wall = max(walls)
        gen = max(part["gen_s"] for part in every)
        tokens = sum(r[5] for r in rows)
        evaluated = sum(1 for r in rows if r[3] != "format_error")
        metrics.update({"perf/rollout_s": wall, "perf/generate_s": gen,
                        "perf/generate_tokens_per_s": tokens / max(1e-9, sum(p["gen_s"] for p in every)),
                        "perf/eval_wait_share": max(0.0, wall - gen) / wall if wall > 0 else 0.0,
                        "perf/evaluations_per_s": evaluated / wall if wall > 0 else 0.0,
                        "perf/samples": float(len(rows))})
        submitted = sum(p["submitted"] for p in every)
        if submitted:
            metrics["perf/reused_evaluations_share"] = sum(p["reused"] for p in every) / submitted
        for k, v in metrics.items():
            trainer._metrics["train"][k].append(float(v))


def rollout_metrics(rows: Sequence[tuple], groups: Sequence[Sequence[float]], best: Sequence[float],
                    openings: Sequence[str]) -> dict[str, float]:
    """reward/ and rollout/ of one batch from per-sample rows (score, reward, advantage, status, turn,
    tokens, finish reason, response, repetition rate); `groups` holds each group's known rewards."""
    n = max(1, len(rows))
    scores = [r[0] for r in rows if r[0] is not None] or [0.0]
    rewards = [r[1] for r in rows if r[1] is not None] or [0.0]
    advs = [r[2] for r in rows]
    adv_mean = sum(advs) / n
    m: dict[str, float] = {
        "reward/mean_score": sum(scores) / len(scores), "reward/best_score": max(scores),
        "reward/mean_return": sum(rewards) / len(rewards),
        "reward/correct_share": sum(r[3] == "correct" for r in rows) / n,
        "reward/trajectory_best_mean": sum(best) / max(1, len(best)),
        "rollout/advantage_mean": adv_mean,
        "rollout/advantage_std": math.sqrt(sum((a - adv_mean) ** 2 for a in advs) / n),
        "rollout/zero_variance_group_share": sum(1 for g in groups if len(set(g)) <= 1) / max(1, len(groups)),
        "rollout/response_tokens_mean": sum(r[5] for r in rows) / n,
        "rollout/response_tokens_max": float(max((r[5] for r in rows), default=0)),
        "rollout/truncated_share": sum(r[6] == "length" for r in rows) / n,
        "rollout/opening_departure_share": departing_share([r[7] for r in rows], openings),
        "rollout/repetition_rate": sum(r[8] for r in rows) / n,
    }
    for t in sorted({r[4] for r in rows}):
        at = [r[0] for r in rows if r[4] == t and r[0] is not None]
        m[f"reward/turn{t + 1}_mean_score"] = sum(at) / max(1, len(at))
    shares = {}
    for r in rows:
        shares[r[3]] = shares.get(r[3], 0) + 1
    from kernelbench.harness.result import STATUSES

    for status in (*STATUSES, "harness_error"):
        m[f"rollout/status_{status}"] = shares.get(status, 0) / n
    return m


# ---------------------------------------------------------------- the trainer subclass and callbacks

def make_trainer_class():
    from trl import GRPOTrainer

    class KernelGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose `rollout_func` sees the batch's rows, and which logs what a multi-turn batch needs.

        Why a subclass: TRL 1.16 passes `rollout_func` only the prompts, not the other dataset columns, and
        the multi-turn rollout needs each row's task id (the prompt is a stand-in; each turn's real context
        is built by the episode). It also records the advantages TRL computed (their share of exact zeros,
        and the test that they equal `rewards/`'s) and the gap between the trainer's and the rollout's
        log-probabilities whenever TRL recomputed old log-probs.
        """

        rollout_inputs: list | None = None
        last_advantages: torch.Tensor | None = None

        def _generate_and_score_completions(self, inputs):
            self.rollout_inputs = inputs
            try:
                out = super()._generate_and_score_completions(inputs)
            finally:
                self.rollout_inputs = None
            adv = out.get("advantages")
            if adv is not None:
                self.last_advantages = adv.detach().cpu()
            old, sampled = out.get("old_per_token_logps"), out.get("sampling_per_token_logps")
            if old is not None and sampled is not None:
                mask = out["completion_mask"].float()
                gap = ((old - sampled).abs() * mask).sum() / mask.sum().clamp(min=1)
                self._metrics["train"]["rollout/logprob_gap_mean"].append(
                    float(self.accelerator.gather(gap.reshape(1)).mean()))
            return out

    return KernelGRPOTrainer


def make_callbacks(config: TrainConfig, out_dir: str, eval_fn: Callable[[Any], None] | None,
                   say: Callable[[str], None] = print):
    from transformers import TrainerCallback

    g = config.grad_steps_per_batch

    class StepMetrics(TrainerCallback):
        """One metrics.jsonl row (and TensorBoard scalars) per step, from the main process only; the run's
        closing summary (TRL's train_runtime etc.) goes to train_summary.json instead of a row."""

        def __init__(self):
            self.logger: MetricsLogger | None = None

        def on_train_begin(self, args, state, control, **kw):
            if state.is_world_process_zero:
                self.logger = MetricsLogger(out_dir, tensorboard=config.tensorboard, trackers=config.trackers,
                                            run_config=to_dict(config))
                self.logger.truncate_after(state.global_step // g - 1)

        def on_step_end(self, args, state, control, **kw):
            if state.global_step >= state.max_steps:
                control.should_save = True  # a checkpoint at the end, whatever checkpoint_every says
            if eval_fn and config.eval_every and state.global_step % (config.eval_every * g) == 0:
                eval_fn(state)

        def on_log(self, args, state, control, logs=None, **kw):
            if self.logger is None or not logs:
                return
            if "train_runtime" in logs:
                with open(os.path.join(out_dir, "train_summary.json"), "w", encoding="utf-8") as f:
                    json.dump(logs, f, indent=1)
                return
            row = {}
            for k, v in logs.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None:
                    key = k if "/" in k and k.split("/")[0] in ("reward", "rollout", "perf", "loss", "eval") else \
                        TRL_RENAMES.get(k, f"trl/{k}")
                    row[key] = float(v)
            self.logger.log(state.global_step // g - 1, row)
            say(f"step {state.global_step // g - 1}: score {row.get('reward/mean_score', 0):.3f} "
                f"correct {row.get('reward/correct_share', 0):.2f} loss {row.get('loss/policy', 0):.4g} "
                f"rollout {row.get('perf/rollout_s', 0):.1f}s")

        def on_train_end(self, args, state, control, **kw):
            if self.logger is not None:
                self.logger.close()

    return [StepMetrics()]


# ---------------------------------------------------------------- main

def load_model(config: TrainConfig) -> tuple[Any, Any, Any]:
    """The policy, the trainer's tokenizer and the rollout's own tokenizer (see MultiTurnRollout)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[config.dtype]
    model = AutoModelForCausalLM.from_pretrained(config.model, dtype=dtype)
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


def main(config: TrainConfig, *, resume: bool = False, rollout: Any = None, say: Callable[[str], None] = print,
         trainer_hook: Callable[[Any], None] | None = None) -> TrainResult:
    """Train; `rollout` replaces the harness rollout (tests); `trainer_hook(trainer)` sees the trainer
    before training (tests)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    validate_train(config)
    t_start = time.perf_counter()
    out = config.out
    if config.torch_threads > 0:
        torch.set_num_threads(config.torch_threads)
    shape = batch_shape(config, world_size_of_launch())
    args = grpo_args(config, shape, out)  # initialises the process group under torchrun / accelerate
    from accelerate import PartialState

    state = PartialState()
    rank, is_main = state.process_index, state.is_main_process
    if state.num_processes != shape.world_size:
        raise RuntimeError(f"launched with WORLD_SIZE {shape.world_size} but got {state.num_processes} processes")
    if is_main:
        save_config(config, out, world_size=state.num_processes, trl_batch=shape.__dict__)
    talk = say if is_main else (lambda _: None)
    model, tokenizer, rollout_tokenizer = load_model(config)
    tasks = resolve_tasks(config.tasks)
    rollout = rollout or make_harness_rollout(config, out, rank=rank)
    rollout_func = MultiTurnRollout(config, rollout, tasks, rollout_tokenizer,
                                    openings_path=os.path.join(out, "openings.json"))
    eval_fn = make_eval_fn(config, rollout, rollout_tokenizer, rollout_func) if config.eval_every else None
    trainer = make_trainer_class()(model=model, reward_funcs=[turn_reward], args=args,
                                   train_dataset=task_dataset(tasks, config.tasks_per_batch),
                                   processing_class=tokenizer, rollout_func=rollout_func,
                                   peft_config=peft_config_of(config), callbacks=make_callbacks(config, out, eval_fn, say))
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
    unwrapped = trainer.accelerator.unwrap_model(trainer.model)
    if config.lora_rank > 0:
        unwrapped = unwrapped.merge_and_unload()
    if is_main:
        unwrapped.save_pretrained(final)
        tokenizer.save_pretrained(final)
    trainer.accelerator.wait_for_everyone()
    done = trainer.state.global_step // config.grad_steps_per_batch
    talk(f"trained {done} steps -> {out}")
    return TrainResult(out_dir=out, steps_done=done, final_dir=final, wall_s=time.perf_counter() - t_start)


def make_eval_fn(config: TrainConfig, rollout: Any, tokenizer: Any, rollout_func: MultiTurnRollout):
    """Held-out evaluation every `eval_every` steps (no update): mean best score and correct share of
    `eval_tasks` under the current weights, logged under `eval/` in that step's row. Every process takes
    an equal share of the tasks (generation under FSDP / ZeRO-3 and vLLM server mode are collective, so
    all processes must generate the same number of times); the results are gathered."""
    tasks = resolve_tasks(config.eval_tasks)
    if config.eval_limit:
        tasks = tasks[:config.eval_limit]

    def run(state: Any) -> None:
        from accelerate.utils import gather_object

        trainer = run.trainer
        if trainer is None or not tasks:
            return
        world, rank = trainer.accelerator.num_processes, trainer.accelerator.process_index
        per_rank = max(1, len(tasks) // world)
        mine = [tasks[(rank * per_rank + i) % len(tasks)] for i in range(per_rank)]
        quiet = replace(rollout, log_dir="") if hasattr(rollout, "log_dir") else rollout
        with generation_policy(trainer, tokenizer, config.backend) as policy:
            trajs = quiet.collect(policy, mine, state.global_step, 7 + state.global_step + 1009 * rank)
        local = [(t.best_score, t.correct) for t in trajs]
        rows = [r for part in gather_object([local]) for r in part] if world > 1 else local
        trainer._metrics["train"]["eval/best_score_mean"].append(sum(r[0] for r in rows) / max(1, len(rows)))
        trainer._metrics["train"]["eval/correct_share"].append(sum(r[1] for r in rows) / max(1, len(rows)))

    run.trainer = None
    return run
