"""Our training config as TRL's `GRPOConfig`: how one step's batch maps onto TRL's batch settings on the
launch's processes, and every other setting under TRL's name."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from train.config import TrainConfig

# Imports inside functions: trl (0.1 s to import) loads when the trainer's arguments are built, not when this module
# is imported for its records and helpers.


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


SERVER_HOST_ENV = "VLLM_SERVER_HOST"


def server_host(config: TrainConfig) -> str:
    """The vLLM server's address: `vllm_server_host`, else the environment's `VLLM_SERVER_HOST`; in server mode
    one of them must say it (a preset names no host: the address is the launch's). Outside server mode,
    TRL's default."""
    if not (config.backend == "vllm" and config.vllm_mode == "server"):
        return config.vllm_server_host or "0.0.0.0"
    host = config.vllm_server_host or os.environ.get(SERVER_HOST_ENV, "")
    if not host:
        raise ValueError(f"vllm_mode server needs the server's address: set vllm_server_host or {SERVER_HOST_ENV}")
    return host


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
        max_steps=config.steps * g, max_completion_length=config.sampling.max_tokens,
        temperature=config.sampling.temperature, top_p=config.sampling.top_p, top_k=0, shuffle_dataset=True, seed=config.seed, data_seed=config.seed,
        # --- generation
        use_vllm=config.backend == "vllm", vllm_mode=config.vllm_mode,
        vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
        vllm_enable_sleep_mode=config.vllm_enable_sleep_mode and config.vllm_mode == "colocate",
        vllm_tensor_parallel_size=config.vllm_tensor_parallel_size, vllm_server_host=server_host(config),
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
