"""`kernel-agent train --plan`: a training run's layout, per-GPU memory and evaluation demand, before any model
loads (no GPU needed).

The memory table is an estimate with its assumptions stated, for deciding a layout, not a promise:
- a LoRA base in the trainer's dtype; LoRA adapters, their gradients and AdamW's two moments in fp32 (peft
  keeps adapters in fp32 under a bf16 base); full fine-tuning in bf16 trains fp32 master weights
  (train/precision.py: fp32 weights under bf16 autocast, or, under ZeRO-3 / FSDP, bf16 weights with the fp32
  copy in the optimizer), which divide, with gradients and optimizer state, by the training GPUs;
- activations of one micro-batch of one sample (prompt budget + completion tokens), with flash attention:
  34 × tokens × hidden bytes per layer (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", table 2, without the attention-score term), all layers without gradient checkpointing,
  one layer plus each layer's input with it;
- logits of the completion tokens in bf16 plus one fp32 pass for the log-probabilities;
- vLLM colocated: `vllm_gpu_memory_utilization` of the GPU while generating (with sleep mode it gives its
  memory back during the update, so the two phases peak separately).
Evaluation demand: one step's evaluations (tasks_per_batch × trajectories × turns), against the layout's
timing GPUs at an assumed run stage and the compile workers at an assumed compile time (`--run-s`,
`--compile-s`; REFERENCES.md: a compile 30-90 s with nvcc, a run stage ~7 s).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable

from train.layout import Layout, resolve

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

GIB = 1024 ** 3
DEFAULT_GPU_GIB = 141.0
"""An H200's memory (141 GB of HBM3e, as `nvidia-smi` reports ~139 GiB usable)."""


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a decoder-only model."""

    params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int


KNOWN_MODELS: dict[str, ModelShape] = {
    # the models' config.json on the Hugging Face Hub (hidden_size, num_hidden_layers, ...); params as published
    "Qwen/Qwen3-8B": ModelShape(8.19e9, 36, 4096, 32, 8, 128, 12288, 151936),
    "Qwen/QwQ-32B": ModelShape(32.8e9, 64, 5120, 40, 8, 128, 27648, 152064),
}


def shape_of(model: str) -> ModelShape:
    """The shape of a known model id, or of a local model folder's config.json; raises ValueError otherwise."""
    if model in KNOWN_MODELS:
        return KNOWN_MODELS[model]
    path = os.path.join(model, "config.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
        h, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
        heads = c["num_attention_heads"]
        kv = c.get("num_key_value_heads", heads)
        hd = c.get("head_dim") or h // heads
        inter = c["intermediate_size"]
        per_layer = h * hd * (heads + 2 * kv) + heads * hd * h + 3 * h * inter
        params = layers * per_layer + vocab * h * (1 if c.get("tie_word_embeddings") else 2)
        return ModelShape(float(params), layers, h, heads, kv, hd, inter, vocab)
    raise ValueError(f"no shape known for model {model!r}: give a local folder with a config.json, or one of "
                     f"{', '.join(KNOWN_MODELS)}")


def lora_params(s: ModelShape, rank: int) -> float:
    """LoRA parameters over every attention and MLP projection (peft's `all-linear` on a Qwen block)."""
    q, kv, o = (s.hidden, s.heads * s.head_dim), (s.hidden, s.kv_heads * s.head_dim), (s.heads * s.head_dim, s.hidden)
    mlp = [(s.hidden, s.intermediate)] * 2 + [(s.intermediate, s.hidden)]
    return float(s.layers * rank * sum(a + b for a, b in [q, kv, kv, o] + mlp))


@dataclass(frozen=True)
class MemoryRow:
    name: str
    gib: float
    note: str = ""


@dataclass(frozen=True)
class MemoryPlan:
    """Per training GPU: the update's rows and the generation phase's (vLLM colocated)."""

    update: tuple[MemoryRow, ...]
    generation: tuple[MemoryRow, ...]
    gpu_gib: float

    @property
    def update_gib(self) -> float:
        return sum(r.gib for r in self.update)

    @property
    def generation_gib(self) -> float:
        return sum(r.gib for r in self.generation)

    @property
    def peak_gib(self) -> float:
        return max(self.update_gib, self.generation_gib)


def memory(config: Any, layout: Layout, shape: ModelShape, gpu_gib: float) -> MemoryPlan:
    """The estimate of the module docstring for one training GPU."""
    wbytes = 2 if config.dtype in ("bfloat16", "float16") else 4
    shards = layout.training_processes if layout.sharding in ("zero3", "fsdp") else 1
    lora = config.lora_rank > 0
    trainable = lora_params(shape, config.lora_rank) if lora else shape.params
    if not lora and wbytes == 2 and shards == 1:
        wbytes = 4  # trainable weights load in fp32 and train under bf16 autocast: they are the masters
    weights = shape.params * wbytes / shards
    # ZeRO-3 / FSDP hold bf16 weights and the fp32 copy in the optimizer (train/precision.py)
    master = 0.0 if lora or wbytes == 4 else trainable * 4 / shards
    grads = trainable * (4 if lora else wbytes) / shards
    optim = trainable * 8 / shards
    tokens = config.prompt.token_budget + config.sampling.max_tokens
    per_layer = 34 * tokens * shape.hidden * config.micro_batch_size
    if config.gradient_checkpointing:
        acts = per_layer + shape.layers * 2 * tokens * shape.hidden * config.micro_batch_size
        acts_note = f"checkpointed: each layer's input + one layer, {tokens} tokens × {config.micro_batch_size}"
    else:
        acts = shape.layers * per_layer
        acts_note = f"every layer kept, {tokens} tokens × {config.micro_batch_size} (gradient_checkpointing off)"
    logits = config.micro_batch_size * config.sampling.max_tokens * shape.vocab * (2 + 4)
    what = "LoRA r%d: %.0fM trainable" % (config.lora_rank, trainable / 1e6) if lora else "full fine-tuning"
    shard_note = f" / {shards} ({layout.sharding})" if shards > 1 else ""
    update = (MemoryRow("weights", weights / GIB, f"{shape.params / 1e9:.1f}B × {wbytes} B{shard_note}"),
              MemoryRow("fp32 master weights", master / GIB, "bf16 training keeps fp32 masters" if master else
                        "the weights are the masters (fp32, bf16 autocast)" if not lora and wbytes == 4 else "not needed"),
              MemoryRow("gradients", grads / GIB, what + shard_note),
              MemoryRow("AdamW state", optim / GIB, "two fp32 moments" + shard_note),
              MemoryRow("activations", acts / GIB, acts_note),
              MemoryRow("logits", logits / GIB, f"{config.sampling.max_tokens} completion tokens × {shape.vocab} vocab"))
    generation: tuple[MemoryRow, ...] = ()
    if config.backend == "vllm" and config.vllm_mode == "colocate":
        resident = weights + master + optim + (0 if config.vllm_enable_sleep_mode else grads)
        generation = (MemoryRow("trainer, resident", resident / GIB, "weights and optimizer state stay"),
                      MemoryRow("vLLM (colocated)", config.vllm_gpu_memory_utilization * gpu_gib,
                                f"vllm_gpu_memory_utilization {config.vllm_gpu_memory_utilization}"))
        if not config.vllm_enable_sleep_mode:  # vLLM keeps its share through the update too
            update += (MemoryRow("vLLM (awake)", config.vllm_gpu_memory_utilization * gpu_gib, "sleep mode off"),)
    return MemoryPlan(update=update, generation=generation, gpu_gib=gpu_gib)


@dataclass(frozen=True)
class Demand:
    evaluations: int
    timing_gpus: int
    compile_workers: int
    run_s: float
    compile_s: float

    @property
    def run_stage_s(self) -> float:
        return self.evaluations * self.run_s / max(1, self.timing_gpus)

    @property
    def compile_stage_s(self) -> float:
        return self.evaluations * self.compile_s / max(1, self.compile_workers)


def demand(config: Any, layout: Layout, run_s: float, compile_s: float) -> Demand:
    """One step's evaluations against the layout's capacity (every node's timing GPUs and every training
    process's compile workers; a Ray pool's capacity is sized outside and not counted)."""
    evaluations = config.tasks_per_batch * config.trajectories * config.turns
    gpus = len(layout.evaluate) * layout.nodes if config.executor.kind == "local" else 0
    workers = config.executor.compile_workers * max(1, layout.training_processes)
    return Demand(evaluations, gpus, workers, run_s, compile_s)


def gpu_memory_gib(config: Any) -> float:
    if config.layout.gpu_memory_gib > 0:
        return config.layout.gpu_memory_gib
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(0).total_memory / GIB
    except Exception:
        pass
    return DEFAULT_GPU_GIB


def plan(config: Any, gpus: int = 0, run_s: float = 7.0, compile_s: float = 60.0,
         say: Callable[[str], None] = print) -> list[str]:
    """Print the plan; returns the problems that make it unrunnable (empty: it fits). Raises
    `train.layout.LayoutError` for a layout that cannot exist."""
    layout = resolve(config, gpus)
    gpu_gib = gpu_memory_gib(config)
    problems: list[str] = []
    say(f"layout: {layout.nodes} node(s) × {layout.gpus_per_node} GPU(s) of {gpu_gib:.0f} GiB; "
        f"{layout.training_processes} training process(es), sharding {layout.sharding}")
    for i, roles in layout.rows():
        say(f"  GPU {i}: {roles}")
    if config.backend == "vllm" and config.vllm_mode == "server" and not layout.vllm_server:
        say(f"  vLLM server: elsewhere ({config.vllm_server_host or 'address not set'}:{config.vllm_server_port})")
    if layout.shared_timing:
        say("  timing shares a GPU with training (layout.share_timing_gpu): a one-GPU check; results flagged")
    shape = shape_of(config.model) if config.model else None
    if shape is None:
        problems.append("model: not set (the plan needs the policy's shape)")
    else:
        mem = memory(config, layout, shape, gpu_gib)
        say(f"memory per training GPU ({config.model}, {config.dtype}):")
        for phase, rows, total in (("update", mem.update, mem.update_gib), ("generation", mem.generation, mem.generation_gib)):
            if not rows:
                continue
            say(f"  {phase}:")
            for r in rows:
                say(f"    {r.name:<22} {r.gib:8.1f} GiB  {r.note}")
            say(f"    {'total':<22} {total:8.1f} GiB  of {gpu_gib:.0f}")
        if mem.peak_gib > gpu_gib:
            problems.append(f"memory: {mem.peak_gib:.0f} GiB per training GPU > {gpu_gib:.0f} GiB: lower micro_batch_size or "
                            f"sampling.max_tokens, turn on gradient_checkpointing, set lora_rank, or shard "
                            f"(layout.sharding: zero3/fsdp)")
    d = demand(config, layout, run_s, compile_s)
    say(f"evaluation per step: {d.evaluations} evaluations ({config.tasks_per_batch} tasks × {config.trajectories} "
        f"trajectories × {config.turns} turns)")
    if config.executor.kind == "local":
        say(f"  run stage: {d.timing_gpus} timing GPU(s) × {run_s:.0f} s each -> {d.run_stage_s / 60:.1f} min of timing per step")
    else:
        say("  run stage: a Ray evaluation pool (sized outside this plan: docs/cluster.md)")
    say(f"  compile: {d.compile_workers} worker(s) × {compile_s:.0f} s each -> {d.compile_stage_s / 60:.1f} min per step "
        f"(at most; identical candidates compile once)")
    return problems
