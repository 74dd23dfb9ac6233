"""`Work`: the bytes a task's inputs and outputs must move at least once and the FLOPs its reference performs.

Counted in the REFERENCE child (trusted task code only, never the candidate's) on one forward of the timed
input configuration, and sent to the parent with the reference's report; `kernelbench.harness.insight.roofline` turns it into
the device's roofline time. Rules (docs/harness.md, "Speed of light"):

- Bytes: every distinct tensor the forward reads from outside (its arguments, the model's parameters and
  buffers) plus every tensor it returns, each once (`numel * element_size`; tensors sharing memory counted
  once). Intermediates are not counted: a fused kernel need not write them, so they are no part of the
  least traffic. Reading inputs once and writing outputs once is the floor any kernel pays.
- FLOPs of matrix products, convolutions and attention: the formulas FlopCounterMode uses
  (`torch.utils.flop_counter.flop_registry`; 2 per multiply-add: `mm` of (M, K) x (K, N) is 2·M·N·K; `addmm`'s bias add is not counted).
- FLOPs FlopCounterMode does not count (it returns 0 for everything outside its registry), by our rule:
  allocation, views, metadata and layout copies (`op_policy.classify_op`) and data moves (`MOVES`:
  `cat`, `flip`, `gather`, `where`...) 0; ops tagged `pointwise`
  1 per output element whatever the function (`relu`, `add`, `exp`, `gelu`: one result per element; the
  roofline takes the cheapest reading so that it stays a bound); ops tagged `reduction` 1 per input element;
  the composite ops in `PER_ELEMENT` their listed count per input element; any other op 1 per element of its
  largest tensor, and its name goes into `estimated_ops` so that a reader sees the count is a guess.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from kernelbench.harness.child.op_policy import classify_op
from kernelbench.harness.protocol import Work

PER_ELEMENT = {
    "_softmax": 5,            # max-reduce, subtract, exp, sum-reduce, divide
    "_log_softmax": 5,        # max-reduce, subtract, exp, sum-reduce, subtract the log
    "native_layer_norm": 7,   # mean, centre, square-accumulate (2), scale, weight, bias
    "native_group_norm": 7,   # as layer norm, over groups
    "_native_batch_norm_legit_no_training": 4,  # eval: centre, scale, weight, bias
    "native_batch_norm": 7,   # train: statistics and normalisation as layer norm
    # pooling: one compare or add per input element (overlapping windows read some twice: an undercount)
    "max_pool1d": 1, "max_pool2d_with_indices": 1, "max_pool3d_with_indices": 1, "avg_pool1d": 1,
    "avg_pool2d": 1, "avg_pool3d": 1, "_adaptive_avg_pool2d": 1, "_adaptive_avg_pool3d": 1,
    "adaptive_max_pool2d": 1, "adaptive_max_pool3d": 1,
    "mse_loss": 3,            # subtract, square, sum
    "smooth_l1_loss": 4,      # subtract, abs, square or shift, sum
    "huber_loss": 4,
    "hardswish": 1,           # pointwise, though not tagged so
}
"""FLOPs per input element of composite (non-pointwise, non-reduction) ops the harness's tasks use."""
MOVES = {"flip", "stack", "cat", "roll", "repeat", "constant_pad_nd", "index_select", "gather", "index",
         "_unsafe_index", "masked_select", "tril", "triu", "where", "scatter", "take"}
"""Ops that move or select data and compute nothing: 0 FLOPs (their bytes are intermediates or outputs).
`where` and `tril`/`triu` select per element; counted as moves, not arithmetic."""


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def distinct_bytes(tensors: list[torch.Tensor], seen: set[tuple[int, int, int]]) -> int:
    """Bytes of `tensors`, skipping any whose (address, bytes, device) `seen` holds already (adds them)."""
    total = 0
    for t in tensors:
        key = (t.data_ptr(), _nbytes(t), hash(t.device))
        if key in seen:
            continue
        seen.add(key)
        total += _nbytes(t)
    return total


def op_flops(name: str, tags: Any, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> tuple[int, bool]:
    """(FLOPs, estimated) of one op FlopCounterMode does not count; `name` is an overload's full name
    (`aten.relu.default`), `tags` its `torch.Tag`s."""
    if classify_op(name) != "compute":
        return 0, False
    largest_out = max((t.numel() for t in outputs), default=0)
    largest_in = max((t.numel() for t in inputs), default=0)
    packet = name.split(".")[1] if "." in name else name
    if packet in MOVES:
        return 0, False
    if torch.Tag.pointwise in tags:
        return largest_out, False
    if torch.Tag.reduction in tags:
        return largest_in, False
    if packet in PER_ELEMENT:
        return PER_ELEMENT[packet] * largest_in, False
    return max(largest_in, largest_out), True


class _Counter(TorchDispatchMode):
    """Counts FLOPs op by op: matrix products, convolutions and attention by the formulas of
    `torch.utils.flop_counter.flop_registry` (those FlopCounterMode uses), every other op by `op_flops`; also
    the dtypes of the work.

    Why not FlopCounterMode itself: its dispatch mode is wrapped to disable Dynamo, and that wrapper imports
    `torch._dynamo` on the first op (3 s on a 2-core VM, in every reference child). This mode makes the same
    calls FlopCounterMode makes -- an op without a formula is first offered to its decomposition, whose pieces
    are counted instead (`OpOverload.decompose`), then the formula of the op that runs is applied to its
    arguments and output -- without Dynamo."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as op_policy.OpTracer: no graph to skip, and importing dynamo costs seconds

    def __init__(self, registry: dict[Any, Any]):
        super().__init__()
        self.registry = registry
        self.matmul_flops = 0
        self.flops = 0
        self.ops = 0
        self.estimated: dict[str, None] = {}
        self.matmul_sizes: dict[str, int] = {}
        self.other_sizes: dict[str, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        packet = func.overloadpacket
        if packet not in self.registry and func is not torch.ops.prim.device.default:
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **kwargs)
        self.ops += 1
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        if packet in self.registry:
            self.matmul_flops += int(self.registry[packet](*args, **kwargs, out_val=out))
            big = max(inputs, key=lambda t: t.numel(), default=None)
            if big is not None:
                key = str(big.dtype).replace("torch.", "")
                self.matmul_sizes[key] = max(self.matmul_sizes.get(key, 0), big.numel())
            return out
        flops, estimated = op_flops(str(func), func.tags, inputs, outputs)
        if flops:
            self.flops += flops
            for t in outputs[:1]:
                key = str(t.dtype).replace("torch.", "")
                self.other_sizes[key] = max(self.other_sizes.get(key, 0), t.numel())
        if estimated:
            self.estimated[str(func)] = None
        return out


def _largest(sizes: dict[str, int]) -> str:
    return max(sizes, key=lambda k: sizes[k]) if sizes else ""


def count_work(model: Any, args: list[Any]) -> Work:
    """One untimed forward of `model(*args)` under the counters (call it inside `torch.no_grad()`)."""
    params = [p for p in model.parameters()] + [b for b in model.buffers()] if hasattr(model, "parameters") else []
    seen: set[tuple[int, int, int]] = set()
    input_bytes = distinct_bytes(_tensors(args) + params, seen)
    from torch.utils.flop_counter import flop_registry  # here, not at import: it imports triton (~1 s) when installed

    counter = _Counter(flop_registry)
    with counter:
        out = model(*args)
    output_bytes = distinct_bytes(_tensors(out), seen)
    return Work(input_bytes=input_bytes, output_bytes=output_bytes, matmul_flops=counter.matmul_flops,
                other_flops=counter.flops, matmul_dtype=_largest(counter.matmul_sizes),
                dtype=_largest(counter.other_sizes) or _dtype_of(out), tf32=bool(torch.backends.cuda.matmul.allow_tf32),
                estimated_ops=tuple(counter.estimated), ops=counter.ops)


def _dtype_of(out: Any) -> str:
    tensors = _tensors(out)
    return str(tensors[0].dtype).replace("torch.", "") if tensors else ""


def measured(model: Any, args: list[Any]) -> tuple[Work | None, str]:
    """The reference child's report entries: (`Work`, ""), or (None, why) when counting raised
    (an op the dispatch modes cannot follow): the roofline is a measurement, not a check, so the evaluation
    goes on and the result's `sol_fraction` stays 0."""
    try:
        with torch.no_grad():
            return count_work(model, args), ""
    except Exception as e:  # the task's own code under a dispatch mode; its failure is not the candidate's
        return None, f"{type(e).__name__}: {e}"[:500]
