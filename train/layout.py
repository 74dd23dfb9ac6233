"""Which GPUs of each node train, generate and time candidates.

Why explicit: without a layout every training process built its own evaluator whose run workers timed on
whatever `cuda:0` was (accelerate leaves `CUDA_VISIBLE_DEVICES` unset on every rank), beside rank 0's trainer
and its vLLM engine: 8 ranks × 6 run workers = 48 timing runs on one GPU, every speedup noise, an
out-of-memory run scored as the model's `runtime_error`. Here a run says which GPUs do what; a timing run
owns its GPU (the sandboxed children see exactly that one through `CUDA_VISIBLE_DEVICES`:
`EvalConfig.cuda_device`), at most one at a time on it across every process of the node
(`kernelbench.executors.gpu_lease`), never on a GPU that trains or generates unless `share_timing_gpu` says so
for a one-GPU check (and the results are flagged). The layout is resolved and validated before anything
loads, and written to `config.json`.

Per node, lowest indices first: the training GPUs (one training process each: accelerate's `cuda:LOCAL_RANK`),
then the GPUs of a vLLM server on this node (server mode), then the evaluation GPUs. In colocate mode each
training process's vLLM engine shares its GPU (`vllm_gpu_memory_utilization`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

import pydantic
import pydantic.dataclasses

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

Sharding = Literal["none", "zero3", "fsdp"]


@pydantic.dataclasses.dataclass(frozen=True, config=pydantic.ConfigDict(extra="forbid"))
class LayoutConfig:
    """The `layout` section of `train`: the node's GPUs by role (docs/scale.md)."""

    gpus_per_node: int = 0
    """GPUs on each training node; 0: what this machine has (`torch.cuda.device_count()`), or `--gpus`."""
    nodes: int = 1
    """Training nodes (accelerate's `num_machines`); each gets the same layout."""
    eval_gpus: int = 1
    """GPUs per training node that time candidates (the highest indices), one timing run at a time each. 0: no
    timing on the training nodes (`executor.kind: ray` with an evaluation pool elsewhere)."""
    vllm_server_gpus: int = 0
    """Server mode: GPUs per training node running `trl vllm-serve` (just below the evaluation GPUs); 0: the
    server runs elsewhere (`vllm_server_host`)."""
    sharding: Sharding = "none"
    """How the training processes hold the model: `none` (DDP: a full copy each), `zero3` (DeepSpeed ZeRO-3)
    or `fsdp` (FSDP2): weights, gradients and optimizer state sharded over every training GPU. Must match the
    accelerate config launched (checked at start); the plan's memory table depends on it."""
    gpu_memory_gib: float = 0.0
    """Memory of one GPU, for the plan; 0: read from the device, or 141 (an H200) when none is visible."""
    share_timing_gpu: bool = False
    """One-GPU checks only: time candidates on a GPU that trains or generates. Speedups are then not
    comparable between runs; every result carries the flag `shared_timing_gpu`."""


class LayoutError(ValueError):
    """A layout that cannot run; the message names the setting to change."""


@dataclass(frozen=True)
class Layout:
    """A resolved layout: local GPU indices per role, the same on every training node."""

    nodes: int
    gpus_per_node: int
    train: tuple[int, ...]
    generate: tuple[int, ...]
    """Colocate: the training GPUs; server mode on this node: the server's; () when generation is elsewhere
    (or on CPU)."""
    evaluate: tuple[int, ...]
    """GPUs the local run workers time on, one worker each."""
    vllm_server: tuple[int, ...] = ()
    shared_timing: bool = False
    """Timing shares a GPU with training or generation (`share_timing_gpu`)."""
    sharding: str = "none"

    @property
    def training_processes(self) -> int:
        return len(self.train) * self.nodes

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "train": list(self.train),
                "generate": list(self.generate), "evaluate": list(self.evaluate),
                "vllm_server": list(self.vllm_server), "shared_timing": self.shared_timing,
                "sharding": self.sharding}

    def rows(self) -> list[tuple[int, str]]:
        """(local GPU index, its roles) for every GPU of a node."""
        out = []
        for i in range(self.gpus_per_node):
            roles = []
            if i in self.train:
                roles.append("train" + (" + vLLM (colocated)" if i in self.generate else ""))
            if i in self.vllm_server:
                roles.append("vLLM server")
            if i in self.evaluate:
                roles.append("time candidates" + (" (shared: one-GPU check)" if self.shared_timing else ""))
            out.append((i, ", ".join(roles) or "idle"))
        return out


CPU_LAYOUT = Layout(nodes=1, gpus_per_node=0, train=(), generate=(), evaluate=())
"""A CPU run: no GPU roles (timing runs one at a time on CPU: `executor.run_workers`)."""


def detected_gpus() -> int:
    """GPUs this process sees (0 without CUDA)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def resolve(config: Any, gpus: int = 0) -> Layout:
    """The layout of a `TrainConfig` on a node of `gpus` GPUs (0: `layout.gpus_per_node`, else detected).
    Raises `LayoutError` naming the setting when the run cannot be laid out."""
    lay: LayoutConfig = config.layout
    if config.device != "cuda":
        return CPU_LAYOUT
    if lay.nodes < 1 or lay.eval_gpus < 0 or lay.vllm_server_gpus < 0:
        raise LayoutError("layout.nodes must be >= 1, layout.eval_gpus and layout.vllm_server_gpus >= 0")
    n = gpus or lay.gpus_per_node or detected_gpus()
    if n < 1:
        raise LayoutError("no GPU visible for a `device: cuda` run: set layout.gpus_per_node (or pass --gpus) to plan "
                          "for a node, or run on a GPU machine")
    server = config.backend == "vllm" and config.vllm_mode == "server"
    if lay.vllm_server_gpus and not server:
        raise LayoutError(f"layout.vllm_server_gpus is {lay.vllm_server_gpus} but generation is not a vLLM server "
                          f"(backend {config.backend!r}, vllm_mode {config.vllm_mode!r}): set it to 0")
    if server and lay.vllm_server_gpus and config.vllm_tensor_parallel_size > lay.vllm_server_gpus:
        raise LayoutError(f"vllm_tensor_parallel_size {config.vllm_tensor_parallel_size} needs that many server GPUs; "
                          f"layout.vllm_server_gpus is {lay.vllm_server_gpus}")
    executor_kind = getattr(getattr(config, "executor", None), "kind", "local")
    shared = False
    evaluate_n = lay.eval_gpus
    if evaluate_n == 0 and executor_kind == "local":
        if not lay.share_timing_gpu:
            raise LayoutError("layout.eval_gpus is 0 with a local executor: candidates would be timed on a training GPU. "
                              "Give the layout evaluation GPUs (layout.eval_gpus), use `executor.kind: ray` with an "
                              "evaluation pool, or set layout.share_timing_gpu for a one-GPU check")
    if executor_kind == "ray" and evaluate_n == 0 and not config.executor.ray_address:
        raise LayoutError("executor.ray_address is empty: a Ray started here would place run actors on this node's "
                          "training GPUs; join the evaluation cluster (`auto` or HOST:6379, this node started with "
                          "`--num-gpus 0`: docs/cluster.md)")
    train_n = n - evaluate_n - lay.vllm_server_gpus
    if lay.share_timing_gpu and train_n < 1 and n >= 1:
        # one GPU does everything: a check of the code path, not a measurement
        train_n, evaluate_n, shared = n - lay.vllm_server_gpus, 0, True
    if train_n < 1:
        raise LayoutError(f"no GPU left to train: {n} per node, layout.eval_gpus {lay.eval_gpus}, layout.vllm_server_gpus "
                          f"{lay.vllm_server_gpus}; lower one of them (or set layout.share_timing_gpu for a one-GPU check)")
    train = tuple(range(train_n))
    vllm_server = tuple(range(train_n, train_n + lay.vllm_server_gpus))
    evaluate = tuple(range(train_n + lay.vllm_server_gpus, n))
    if not evaluate and lay.share_timing_gpu and executor_kind == "local":
        evaluate, shared = (train[-1],), True  # the last training GPU: rank 0's engine and trainer sit on GPU 0
    if config.tasks_per_batch % (train_n * lay.nodes):
        raise LayoutError(f"tasks_per_batch ({config.tasks_per_batch}) must be a multiple of the training processes "
                          f"({train_n} GPUs × {lay.nodes} node(s)): each process rolls out whole tasks")
    generate = vllm_server if server else train
    return Layout(nodes=lay.nodes, gpus_per_node=n, train=train, generate=generate, evaluate=evaluate,
                  vllm_server=vllm_server, shared_timing=shared, sharding=lay.sharding)


def visible_id(index: int) -> str:
    """The `CUDA_VISIBLE_DEVICES` entry of local GPU `index` of this process's view: the parent's own list
    when it has one (a launcher may have narrowed it), else the index."""
    seen = [s.strip() for s in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if s.strip()]
    if not seen:
        return str(index)
    if index >= len(seen):
        raise LayoutError(f"GPU {index} is not in this process's CUDA_VISIBLE_DEVICES ({','.join(seen)})")
    return seen[index]


def evaluation_gpus(layout: Layout) -> tuple[str, ...]:
    """The `CUDA_VISIBLE_DEVICES` entries the local run workers time on (one worker each)."""
    return tuple(visible_id(i) for i in layout.evaluate)


def check_launch(layout: Layout, processes: int, distributed_type: str = "") -> None:
    """Refuse a launch that does not match the layout: the number of training processes and, when known,
    the sharding accelerate was started with."""
    if layout is CPU_LAYOUT or not layout.train:
        return
    if processes != layout.training_processes:
        raise LayoutError(f"launched {processes} training process(es) but the layout trains on {len(layout.train)} GPU(s) "
                          f"× {layout.nodes} node(s) = {layout.training_processes}: pass `--num_processes "
                          f"{layout.training_processes}` to accelerate launch, or change layout.eval_gpus / "
                          f"layout.vllm_server_gpus / layout.gpus_per_node")
    kind = distributed_type.upper()
    want = {"zero3": "DEEPSPEED", "fsdp": "FSDP"}.get(layout.sharding)
    if kind and processes > 1 and want and want not in kind:
        raise LayoutError(f"layout.sharding is {layout.sharding!r} but accelerate runs {distributed_type}: launch with "
                          f"the matching config under configs/accelerate/ or change layout.sharding")
    if kind and layout.sharding == "none" and ("DEEPSPEED" in kind or "FSDP" in kind):
        raise LayoutError(f"layout.sharding is 'none' but accelerate runs {distributed_type}: set layout.sharding "
                          f"(the plan's memory table depends on it)")


def launched_sharding() -> str:
    """What accelerate launched this process with, from the variables it sets for its processes:
    `DEEPSPEED`, `FSDP`, or "" (DDP, torchrun, a single process: nothing sharded)."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return "DEEPSPEED"
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "FSDP"
    return ""
