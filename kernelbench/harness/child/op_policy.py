"""The dynamic op policy: which PyTorch (ATen) ops `ModelNew.forward` may dispatch, and whether its kernel ran.

`OpTracer` records every ATen op that reaches the dispatcher while it is active, including those a C++
extension calls (`at::relu` inside a load_inline function shows up as `aten.relu.default`: the Python
dispatch key is in thread-local state, and the extension's call goes through the same dispatcher). That is
what catches a "kernel" that only wraps `at::matmul`. It cannot see ATen reached around the dispatcher
(`at::native::`, `at::cpu::`, dispatch-key guards); the static checks reject those spellings.

Policies (DESIGN.md rule 5; the harness records which one judged a result):
- `strict` (Kevin-32B, arXiv 2507.11948: responses using PyTorch ops got no reward; the default for
  training and benchmarks): forward may only allocate, fill with constants, take views, read metadata, and
  copy for layout or dtype. Copies are allowed because every C++/CUDA kernel needs `x.contiguous()` and
  outputs in the task's dtype; they move data, they do not compute the function. The one task they could
  solve alone is a pure layout change, and the kernel must still run (`kernel_not_called`).
- `partial`: PyTorch compute ops allowed beside custom kernels (as KernelBench's own examples do on
  level-3 models). Heuristic: the traced forward must call a custom kernel at least once. Whether the kernel
  does the expensive part is not judged (Kevin-32B saw policies fuse only the cheap ops); use `strict` when
  that matters.
Both policies flag `dynamic:kernel_not_called` when no custom kernel ran (a ghost kernel: compiled, never
called); a Triton launch is a call of the candidate's own kernel (`kernel_calls.install_triton`). Ops from namespaces other than aten/prims are unknown, so they count as compute: deny by default.
"""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

from kernelbench.harness.protocol import Violation

POLICIES = ("strict", "partial")

# Allocation: fresh memory, possibly filled with a constant. zeros/ones/full are allocation plus a fill;
# a constant cannot carry the answer, so they are as harmless as `empty` (outputs that must start at zero
# are common in reduction kernels).
ALLOC = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
         "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
         "scalar_tensor", "zero_", "resize_", "lift_fresh"}
# Views share storage and compute nothing.
VIEW = {"view", "_unsafe_view", "_reshape_alias", "reshape", "as_strided", "permute", "transpose", "t",
        "expand", "expand_as", "squeeze", "unsqueeze", "slice", "select", "narrow", "alias", "detach",
        "unflatten", "flatten", "split", "split_with_sizes", "chunk", "unbind", "unfold", "diagonal", "view_as",
        "view_as_real", "view_as_complex", "movedim", "swapaxes", "unsafe_split"}
# Metadata reads.
META = {"size", "sym_size", "stride", "sym_stride", "numel", "sym_numel", "dim", "is_contiguous",
        "is_same_size", "storage_offset", "sym_storage_offset", "is_nonzero"}
# Layout and dtype copies (see the module docstring for why strict allows them).
COPY = {"clone", "copy_", "_to_copy", "to", "contiguous", "_copy_from", "_copy_from_and_resize",
        "lift_fresh_copy", "_local_scalar_dense"}
# `fill_` with a Scalar is a constant fill; `fill_.Tensor` copies a value computed elsewhere.
ALLOC_OVERLOADS = {"fill_.Scalar"}
# `set_` onto a storage makes a tensor alias memory, computing nothing: Triton's interpreter re-points its
# launch arguments at their storages this way (and copies them back with `copy_`) around every CPU launch.
VIEW_OVERLOADS = {"set_.source_Storage", "set_.source_Storage_storage_offset"}


FILLS = {"zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "zero_"}
"""Allocations that also write every byte of their output (a constant)."""


def moves_data(name: str) -> bool:
    """Whether an allowed op writes every byte of its output (a fill or a layout copy): the ops whose time grows
    with their data. Views, metadata, `set_`, `resize_` and bare allocation take microseconds whatever the size
    (`code_attribution` charges their windows that alone)."""
    parts = name.split(".")
    op, overload = (parts[1] if len(parts) > 1 else ""), ".".join(parts[1:3])
    kind = classify_op(name)
    return (kind == "copy" and op != "_local_scalar_dense") or op in FILLS or overload in ALLOC_OVERLOADS


def classify_op(name: str) -> str:
    """`alloc` | `view` | `meta` | `copy` | `compute` for an overload name such as `aten.relu.default`."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] not in ("aten", "prims"):
        return "compute"
    op = parts[1]
    overload = ".".join(parts[1:3])
    if op in ALLOC or overload in ALLOC_OVERLOADS:
        return "alloc"
    if op in VIEW or overload in VIEW_OVERLOADS:
        return "view"
    if op in META:
        return "meta"
    if op in COPY:
        return "copy"
    return "compute"


class OpTracer(TorchDispatchMode):
    """Context manager recording ATen overload names dispatched while active, in call order.

    Use around one forward call that is not timed: the mode adds Python overhead to every op.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Else torch wraps __torch_dispatch__ in a dynamo-disabling shim whose first call imports
        # torch._dynamo (2-4 s per run child on 2 cores). Nothing compiles under this mode: the static checks
        # reject torch.compile, so there is no graph for dynamo to skip.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def judge_ops(ops: list[str], policy: str, kernel_calls: int) -> list[Violation]:
    """Violations of `policy` for one traced forward: `ops` from OpTracer, `kernel_calls` counted over the
    same forward (`kernel_calls.reset()` before it, `kernel_calls.count()` after)."""
    if policy not in POLICIES:
        raise ValueError(f"op policy must be one of {POLICIES}, got {policy!r}")
    found = []
    if kernel_calls <= 0:
        found.append(Violation("dynamic:kernel_not_called",
                               "no custom kernel ran during forward: a compiled kernel must be called"))
    if policy == "strict":
        compute = [op for op in ops if classify_op(op) == "compute"]
        if compute:
            first = list(dict.fromkeys(compute))[:4]
            found.append(Violation("dynamic:torch_compute_op",
                                   f"forward ran {len(compute)} PyTorch compute op(s) ({', '.join(first)}); "
                                   "strict policy allows only allocation, views, metadata and layout copies"))
    return found
