"""Configs of the training commands: one frozen dataclass per command, loaded from preset files.

Each config is a pydantic dataclass (docs/architecture.md, "Configuration"): constructing one validates it,
modes are `Literal` types, and `dataclasses.replace` validates the result again. Presets (`train/presets.py`)
hold one section per command (`sft:`, `train:`, `pipeline:`), validated strictly as a whole through
`kernelbench.config_files`: an unknown key or a value of the wrong type is a `ConfigError` naming the file
and the key's path (`train.sampling.temprature`), so that a typo never silently falls back to a default. The settings train,
bench and optimize share are one dataclass each, nested under one name in every command's config:
`sampling` (agent.policy.SamplingConfig), `prompt` (agent.prompts.PromptSettings), `eval`
(kernelbench.harness.config.EvalConfig), `executor` (kernelbench.executors.executor.ExecutorConfig) and
`score` (rewards.ScoreConfig); in a preset they are sub-sections (`eval: {timing_trials: 20}`). A flat name
of before (`max_new_tokens`) is an error that names its new place (`sampling.max_tokens`: `presets.RENAMED`). The
resolved config (every field, defaults included: pydantic's JSON dump) is saved beside each run's outputs as
`config.json`, and validates back into an equal config.

Defaults follow Kevin-32B (arXiv 2507.11948) wherever it states a number; DESIGN.md "Training defaults".
"""

from __future__ import annotations

import logging
from dataclasses import field, replace
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, ValidationInfo
from pydantic.dataclasses import dataclass

from agent.policy import SamplingConfig
from agent.prompts import PromptSettings
from kernelbench.executors.executor import ExecutorConfig
from kernelbench.harness.config import EvalConfig
from rewards.score import ScoreConfig
from train.layout import LayoutConfig

# Imports inside functions: train.precision imports torch; a config loads without it (`kernel-agent train --help`,
# presets' checks).

STRICT = ConfigDict(extra="forbid")
"""Every config: unknown fields are errors. Presets, flags and config.json are validated in strict mode on top
(`validate`): a quoted number or a `yes` for a count is an error, not a conversion."""
Device = Literal["cpu", "cuda"]
Dtype = Literal["float32", "bfloat16"]
"""train/precision.py's DTYPES."""
LossNorm = Literal["dr_grpo", "grpo", "dapo"]
ISMode = Literal["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]
VLLMMode = Literal["colocate", "server"]
FULL_FT_RL_RATE = 2e-6
"""Kevin-32B's RL learning rate (full fine-tuning; arXiv 2507.11948): the base of the LoRA rule."""


@dataclass(frozen=True, config=STRICT)
class SFTConfig:
    """`kernel-agent sft`: supervised warm start on solution trajectories (TRL's SFTTrainer)."""

    model: str = "tiny"
    """`tiny` builds a fresh tiny Qwen3 and trains its tokenizer on the data; otherwise a local model path."""
    tiny_hidden_size: int = 192
    """Tiny Qwen3 width (REFERENCES.md: hidden 192, 4 layers, 4 heads memorises ~1k-token solutions)."""
    tiny_layers: int = 4
    """Tiny Qwen3 depth."""
    tiny_heads: int = 4
    """Tiny Qwen3 attention heads."""
    tiny_kv_heads: int = 2
    """Tiny Qwen3 key/value heads (grouped-query attention as in Qwen3)."""
    tiny_intermediate_size: int = 512
    """Tiny Qwen3 MLP width."""
    tiny_vocab_size: int = 2048
    """Byte-level BPE vocabulary trained on the warm-start texts."""
    tiny_merge_across_words: bool = False
    """Tokens may span words (train/tiny_model.py `TinyModelConfig.merge_across_words`): with data that
    repeats a few answers, each answer becomes a handful of tokens and its first token already picks it."""
    data: str = "solutions"
    """`solutions` (reference solutions formatted as agent turns), `family:NAME` (a task family's first and
    second turns: train/family_examples.py) or a trajectories.jsonl of earlier runs."""
    tasks: tuple[str, ...] = ()
    """Task ids to take solutions for (e.g. `L1/03_silu`); empty: every task with a solution (with
    `family:NAME`: the family's training tasks)."""
    solution_kinds: tuple[Literal["cpu", "cpu_slow", "cuda"], ...] = ("cpu", "cpu_slow")
    """Solution folders to draw from (`cpu`, `cpu_slow`, `cuda`); a task with two kinds gets both."""
    slow_copies: int = 1
    """Copies of each `cpu_slow` answer in the solutions data. A memoriser splits its probability by how often
    each answer appears: 1 starts the policy near 50/50 between the fast and the slow kernel, 4 near 1/5 fast
    (the cpu-tiny preset), so that RL has to move the share to show it learned."""
    only_correct: bool = True
    """From trajectories: keep only turns the harness judged correct."""
    min_speedup: float = 0.0
    """From trajectories: keep only correct turns at least this fast (1.0: only kernels faster than eager)."""
    device: Device = "cpu"
    """Where the model trains (`cpu` or `cuda`), and which kernels the prompts ask for."""
    dtype: Dtype = "float32"
    """`float32`, or `bfloat16`: on a GPU, bf16 autocast over fp32 master weights (a LoRA base stays bf16,
    frozen; train/precision.py)."""
    lora_rank: int = 0
    """LoRA rank via peft on every linear layer (0: full fine-tuning). The learning rate of a LoRA run is
    ~10x full fine-tuning's (train/precision.py)."""
    lora_alpha: int = 32
    """LoRA scaling numerator."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (long examples of a large model on one GPU)."""
    hardware: str = "CPU (one thread)"
    """Hardware named in the prompts (must match what training and benchmarks will say)."""
    prompt_style: Literal["full", "compact"] = "full"
    """`full` or `compact` prompts (agent.prompts.PromptSettings.style); must match the RL run's."""
    compact_solutions: bool = False
    """Answers are the solution files without the module docstring and C++ comments (the same code, about
    25 % fewer tokens to memorise); the docstring's first sentence still opens the answer as its summary."""
    max_steps: int = 800
    """Most optimizer steps (REFERENCES.md: ~800 single-example steps to reach loss < 0.0005)."""
    target_loss: float = 0.0005
    """Stop once the mean training loss over `loss_window` steps falls below the data's loss floor plus
    this (0: never stop early). The floor is not zero when one prompt has two answers (a fast and a slow
    solution): the best a model can do is ln 2 on the token where they part, spread over the answer's tokens."""
    loss_window: int = 8
    """Steps averaged for the early-stop test."""
    learning_rate: float = 2e-3
    """AdamW learning rate (2e-3 memorises the tiny model; use ~1e-5 for real checkpoints)."""
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    """`constant`, or `linear` / `cosine` decay to 0 at `max_steps` (transformers scheduler names). A tiny
    model memorising at 3e-3 keeps jumping back up (loss 0.01 -> 0.15 in one step, measured); a decay
    lets it settle below the target instead."""
    batch_size: int = 1
    """Examples per step."""
    max_length: int = 4096
    """Longest example in tokens (prompt + answer); longer ones are dropped with a warning."""
    torch_threads: int = 0
    """torch intra-op threads (0: torch's default). 1 on a shared 2-core machine: with the harness compiling
    beside it, two threads each ran a step 3-7x slower than one thread alone (measured)."""
    check_samples: int = 0
    """After training, sample each task's answer this many times at `check_temperature` and count answers
    equal to a training answer, parseable, or neither (written to check.json; 0: skip)."""
    check_prompts: int = 0
    """Most distinct prompts the check samples, spread evenly over the data (0: every prompt); a family's data
    has one prompt per task and context, over a hundred."""
    check_temperature: float = 0.9
    """Temperature of that check (the RL sampling temperature)."""
    seed: int = 0
    """Seed for the model's initial weights, data order and TRL."""
    out: str = "runs/sft"
    """Output folder: the model and tokenizer (loadable by the hf backend), config.json, log.jsonl."""


@dataclass(frozen=True, config=ConfigDict(extra="forbid", validate_default=True))
class TrainConfig:
    """`kernel-agent train`: multi-turn GRPO with the harness in the loop."""

    model: str = ""
    """Policy to start from: a local model folder (an SFT output or a hub checkpoint already on disk)."""
    tasks: str = "builtin:train"
    """`ORIGIN[:SPLIT]` (e.g. `builtin:train`) or a comma-separated list of task ids of the built-in suite."""
    steps: int = 100
    """Training steps; one step = one batch of rollouts and `grad_steps_per_batch` optimizer updates."""
    tasks_per_batch: int = 8
    """Tasks per batch (Kevin-32B: 8)."""
    trajectories: int = 16
    """Trajectories sampled per task (Kevin-32B: 16; 64 gave no gain and earlier junk)."""
    turns: int = 4
    """Refinement turns per trajectory in training (Kevin-32B: 4; 8 at test time)."""
    gamma: float = 0.4
    """Discount of later turns' scores in a turn's return (Kevin-32B: 0.4 with sum)."""
    return_mode: Literal["sum", "max"] = "sum"
    """`sum` or `max` aggregation of later scores (Kevin-32B: max with gamma 0.8 did better with fewer turns)."""
    advantage_scale: Literal["std", "none"] = "std"
    """`std`: (R - mean) / std over a task's samples (Kevin-32B); `none`: R - mean (Dr. GRPO)."""
    eps_low: float = Field(0.2, ge=0, lt=1)
    """Lower clip of the probability ratio (Kevin-32B: 0.2; TRL: `epsilon`)."""
    eps_high: float = Field(0.28, ge=0)
    """Upper clip of the ratio, wider to keep exploring (Kevin-32B, DAPO: 0.28; TRL: `epsilon_high`)."""
    kl_coef: float = 0.0
    """KL penalty against the starting policy (Kevin-32B: 0; 0.001/0.01 slowed learning without stopping junk;
    TRL: `beta`)."""
    loss_norm: LossNorm = "dr_grpo"
    """Token-loss normalisation: `dr_grpo` (sum / (sequences × max_new_tokens), Kevin-32B's choice),
    `grpo` (mean per sequence, then over sequences), `dapo` (sum / tokens in the batch). TRL: `loss_type`."""
    grad_steps_per_batch: int = Field(2, ge=1)
    """Optimizer steps per batch: the batch is split into this many mini-batches (Kevin-32B: 2). TRL:
    `steps_per_generation` = this × `gradient_accumulation_steps`."""
    iterations_per_batch: int = Field(1, ge=1)
    """Passes over each batch (TRL: `num_iterations`; Kevin-32B: 1)."""
    micro_batch_size: int = Field(4, ge=1)
    """Samples per forward/backward pass (TRL: `per_device_train_batch_size`; gradient accumulation fills a
    mini-batch). A rank's samples per batch must be a multiple of this × `grad_steps_per_batch`."""
    learning_rate: float = 2e-6
    """Constant learning rate after warm-up (Kevin-32B: 2e-6)."""
    warmup_ratio: float = 0.03
    """Share of the optimizer steps spent warming the learning rate up linearly (Kevin-32B: 3 %)."""
    grad_clip: float = 0.05
    """Global gradient-norm clip (Kevin-32B: 0.05, which with Dr. GRPO delayed junk from step ~35 to ~100;
    TRL: `max_grad_norm`)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    optimizer: Literal["adamw", "sgd"] = "adamw"
    """`adamw` (Kevin-32B; TRL `optim` adamw_torch) or `sgd`. SGD for a memorised tiny policy: its update is
    proportional to the gradient, so tokens the model is sure of (gradient ~0) stay put and only the
    contested choice moves; AdamW rescales those near-zero gradients to full-size steps, and at lr 3e-4 ten
    steps turned most answers of the cpu-tiny warm start into unparseable or uncompilable text (measured)."""
    is_mode: ISMode = "token_truncate"
    """vLLM only: importance-sampling correction between vLLM's and the trainer's log-probabilities
    (TRL `vllm_importance_sampling_mode`: token_truncate, token_mask, sequence_truncate, sequence_mask)."""
    is_cap: float = 2.0
    """Cap of that importance weight (TRL: `vllm_importance_sampling_clip_max`)."""
    backend: Literal["hf", "vllm"] = "hf"
    """Rollout generation: `hf` (transformers `generate` on the trainer's own weights; CPU, or one GPU) or
    `vllm` (TRL's vLLM integration: weights synced each step, LoRA merged first, prefix cache reset)."""
    vllm_mode: VLLMMode = "colocate"
    """`colocate` (vLLM inside each training process, sharing its GPU) or `server` (`trl vllm-serve` on
    separate GPUs; see the 32B preset)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Colocate: share of each GPU vLLM may take (the trainer needs the rest)."""
    vllm_enable_sleep_mode: bool = True
    """Colocate: vLLM releases its weights and KV cache while the trainer updates."""
    vllm_tensor_parallel_size: int = 1
    """Colocate: GPUs per vLLM engine."""
    vllm_server_host: str = ""
    """Server mode: host of `trl vllm-serve`; empty: the environment's `VLLM_SERVER_HOST` (one of them must say
    it: a preset names no host)."""
    vllm_server_port: int = 8000
    """Server mode: port of `trl vllm-serve`."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (memory for time; on for 8B/32B on GPU, off on CPU)."""
    device: Device = "cpu"
    """Where the trainer runs and which kernels are asked for (`cpu`: C++ kernels; `cuda`: CUDA kernels)."""
    dtype: Dtype = "float32"
    """`float32`, or `bfloat16`: on a GPU, bf16 autocast over fp32 master weights, so updates of ~1e-5 are not
    rounded away (a LoRA base stays bf16, frozen; train/precision.py)."""
    lora_rank: int = 0
    """LoRA rank via peft (0: full fine-tuning). Its learning rate is ~10x full fine-tuning's (Schulman et al.,
    "LoRA Without Regret", 2025; train/precision.py): a LoRA run below 3x the full rate (2e-6) is warned of."""
    lora_alpha: int = 32
    """LoRA scaling numerator."""
    sampling: SamplingConfig = field(default_factory=lambda: SamplingConfig(temperature=0.9, max_tokens=16384))
    """Rollout sampling (`agent.policy.SamplingConfig`): Kevin-32B samples at temperature 0.9 with 16k-token
    responses (`max_tokens`, TRL's `max_completion_length`). Its `seed` is unused: each step's seed comes
    from `seed` (below), the step and the rank."""
    prompt: PromptSettings = field(default_factory=lambda: PromptSettings(device="cpu", hardware="CPU (one thread)"))
    """Prompt settings (`agent.prompts.PromptSettings`): `hardware` named in the prompts, `token_budget` (most
    prompt tokens, oldest earlier attempts dropped first; Kevin-32B: 8k), `style` (`full`, or `compact` for
    tiny models), `language` (`cuda`, `triton` or `cpp`; empty: the device's own; Triton on `cpu` runs under
    its interpreter and is judged for correctness only). `device` is this config's `device`."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Harness settings of each evaluation (`kernelbench.harness.config.EvalConfig`): `size` (`cpu` or `gpu`),
    `timing_trials`, `correctness_trials`, `warmup_trials`, `extra_distribution_trials`, `build_cache_dir`
    (identical candidates compile once), ... `device` is this config's `device`."""
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    """Where the harness evaluates rollouts (`kernelbench.executors.executor.ExecutorConfig`): `kind` (`local`
    or `ray`, docs/cluster.md), `ray_address`, `compile_workers`, `run_workers` (one per GPU; one on CPU so
    timings do not collide), `max_in_flight` (0: no bound)."""
    score: ScoreConfig = field(default_factory=ScoreConfig)
    """How a verdict becomes a turn's score (`rewards.ScoreConfig`): `correctness_weight` (the bonus of a correct
    kernel, added to its speedup; Kevin-32B: 0.3) and `speedup_cap` (largest speedup a score counts; None: no
    cap, as Kevin-32B)."""
    layout: LayoutConfig = field(default_factory=LayoutConfig)
    """Which GPUs of each node train, generate and time candidates (`train.layout.LayoutConfig`):
    `gpus_per_node`, `nodes`, `eval_gpus`, `vllm_server_gpus`, `sharding`, `gpu_memory_gib`,
    `share_timing_gpu`. Resolved and checked before anything loads (`kernel-agent train --plan` prints it);
    ignored on CPU."""
    reuse_identical_results: bool = False
    """Evaluate each distinct (task, candidate text) once per run and give later identical samples the same
    verdict. Off by default (every sample is measured afresh). On for cpu-tiny, whose memorised policy
    resamples the same two texts per task: on 2 shared cores one run stage (sandboxed child, reference,
    correctness and timing trials) costs seconds, and measuring an identical text again only redraws
    timing noise. The first evaluation of each text is complete (correctness, policy checks, timing). A text
    rejected on timing noise alone (`train/rollout.NOISY_FLAGS`) is measured again when it comes back."""
    noisy_retries: int = 0
    """With `reuse_identical_results`: a text rejected on timing noise alone is measured up to this many more
    times at once, before any sample gets the verdict (0: it waits for the text to come back). cpu-tiny: 1;
    on its loaded 2 cores the fast kernel was once rejected `timing_inconsistent` on its first two visits, its
    six samples scored 0 below the slow kernel's 0.4, and RL turned away from it."""
    streaming_turns: bool = True
    """A trajectory's next turn is generated as soon as its own verdict is back, in a policy call with whatever
    other prompts are ready then (`agent.episode.EpisodeRunner`): one slow compile holds only its own
    trajectory. False: the earlier lockstep schedule, a task's trajectories advancing turn by turn together
    (one call per task and turn). Streaming makes more, smaller calls; where a call lasts about as long
    whatever its size (decode-bound) and verdicts come back close together, lockstep may finish first:
    `perf/eval_wait_share` and `perf/rollout_s` tell (docs/scale.md)."""
    checkpoint_every: int = 10
    """Save a resumable checkpoint (TRL's: model, optimizer, scheduler, RNG, trainer state) every N steps and
    at the end, under `checkpoints/checkpoint-K` (K counts optimizer steps: step × grad_steps_per_batch)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (oldest deleted first; TRL `save_total_limit`)."""
    eval_every: int = 0
    """Every N steps, run the policy on `eval_tasks` (no update) and log `eval/` metrics (0: never)."""
    eval_tasks: str = "builtin:heldout"
    """Held-out tasks of that evaluation (`ORIGIN[:SPLIT]` or ids)."""
    eval_limit: int = 2
    """Most held-out tasks per evaluation (0: all)."""
    tensorboard: bool = True
    """Also write metrics as TensorBoard scalars under `tb/`."""
    trackers: tuple[Literal["wandb", "trackio"], ...] = ()
    """Optional extra trackers: `wandb`, `trackio` (imported only when named)."""
    torch_threads: int = 0
    """torch intra-op threads of the trainer and the hf rollout (0: torch's default; 1 on small CPUs)."""
    seed: int = 0
    """Seed of data order, sampling and any randomness in the update."""
    out: str = "runs/train"
    """Output folder: config.json, metrics.jsonl, tb/, trajectories/, checkpoints/, final/."""

    @field_validator("prompt", "eval")
    @classmethod
    def _device_from_config(cls, value: Any, info: ValidationInfo) -> Any:
        """The nested sections take the config's `device` (validated before them: fields validate in order); one
        place sets it, and a section's own `device` is overwritten."""
        return replace(value, device=info.data["device"]) if "device" in info.data else value

    @property
    def samples_per_task(self) -> int:
        """One sample per turn: a task's group is trajectories × turns (TRL: `num_generations`)."""
        return self.trajectories * self.turns


@dataclass(frozen=True, config=STRICT)
class PipelineConfig:
    """`kernel-agent train --pipeline`: SFT warm start, RL, held-out bench and a report, in one folder."""

    bench_tasks: str = "builtin:heldout"
    """Tasks of the held-out bench (`ORIGIN[:SPLIT]` or comma-separated ids); empty: no bench."""
    bench_limit: int = 2
    """Held-out tasks benchmarked (0: all)."""
    bench_trajectories: int = 4
    """Trajectories per held-out task."""
    bench_turns: int = 1
    """Turns per held-out trajectory."""
    train_bench_trajectories: int = 8
    """Samples per held-out task of each probe, before and after RL (jobs/probes.py)."""
    probe_tasks: str = "family:affine:heldout"
    """Held-out tasks of a task family the probes sample (`family:NAME:heldout` or ids); neither SFT nor RL
    sees them. The first-answer probe and the refinement probe both run on them."""
    prebuild: bool = True
    """Evaluate the family's answers beside SFT: each once on a training task (RL then finds their builds in
    the cache) and the two second answers on every probe task (the refinement probe's real feedback)."""


def validate_train(config: TrainConfig) -> None:
    """Reject settings the update cannot honour that a field's type cannot say, with the reason."""
    if config.samples_per_task < 2:
        raise ValueError("trajectories × turns must be >= 2 (a group of one sample has no advantage)")
    from train.precision import check_lora_rate

    warning = check_lora_rate(config.lora_rank, config.learning_rate, FULL_FT_RL_RATE)
    if warning:
        logging.getLogger(__name__).warning(warning)
