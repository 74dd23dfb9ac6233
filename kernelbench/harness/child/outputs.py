"""What a child keeps of one forward call: its output flattened into plain dense CPU tensors with their
metadata, and the record of a call the parent judges (the output and the arguments afterwards)."""

from __future__ import annotations

import hashlib
from typing import Any

from kernelbench.harness.child import call_frames

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.


def non_overlapping_and_dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a strided tensor's elements fill one block of memory exactly once, in any dimension order (a
    transposed or channels-last result is dense; a broadcast or a slice with gaps is not).

    Written out here because torch's own helper moved (`torch._prims_common.is_non_overlapping_and_dense` is
    gone in torch 2.13): the fallback to `is_contiguous` rejected every correct column-major output."""
    if any(n == 0 for n in shape):
        return True
    expected = 1
    for n, s in sorted(((n, s) for n, s in zip(shape, strides) if n != 1), key=lambda d: d[1]):
        if s != expected:
            return False
        expected *= n
    return True


def flatten_output(out: Any) -> tuple[str, list[Any], list[dict[str, Any]]]:
    """(structure, plain dense CPU tensors, per-tensor metadata) of a forward's return value."""
    import torch

    if isinstance(out, (tuple, list)):
        parts = [flatten_output(o) for o in out]
        structure = "(" + ",".join(p[0] for p in parts) + ")"
        return structure, [t for p in parts for t in p[1]], [m for p in parts for m in p[2]]
    if not isinstance(out, torch.Tensor):
        return f"<{type(out).__name__}>", [], []
    dense = non_overlapping_and_dense(tuple(out.shape), tuple(out.stride())) if out.layout == torch.strided else False
    meta = {"type": type(out).__name__, "exact_tensor": type(out) is torch.Tensor, "dtype": str(out.dtype).replace("torch.", ""),
            "shape": list(out.shape), "device": out.device.type, "dense": dense, "layout": str(out.layout)}
    plain = torch.empty(tuple(out.shape), dtype=out.dtype)
    plain.copy_(out.detach())
    return "T", [plain], [meta]


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def call_record(out: Any, args: list[Any]) -> dict[str, Any]:
    """What the parent judges of one call: the output as plain dense tensors and the arguments after the call
    (`protocol.CallRecord`'s fields; a plain dict, the shape `call_frames` encodes)."""
    import torch

    return {"outputs": flatten_output(out)[1],
            "inputs_after": [flatten_output(a)[1][0] if isinstance(a, torch.Tensor) else None for a in args]}


def report_value(out: Any, buffers: list[Any]) -> list[Any]:
    """The payload the run child sends for one call, as the buffers `report.Reporter.send_parts` writes
    (`report.Reporter.send_tensors` writes the same)."""

    return call_frames.encode(call_record(out, buffers))


def tensor_digest(t: Any) -> str:
    """SHA-256 of a tensor's dtype, shape and bytes (on the CPU, dense)."""
    import torch

    flat = t.detach().to("cpu").contiguous().reshape(-1)
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    if flat.numel():
        h.update(flat.view(torch.uint8).numpy())  # the buffer itself: no 8 MB copy per digest
    return h.hexdigest()


def input_digests(values: list[Any]) -> list[str | None]:
    """`tensor_digest` of each tensor argument, None for the others."""
    import torch

    return [tensor_digest(v) if isinstance(v, torch.Tensor) else None for v in values]


def plain_copy(value: Any) -> Any:
    """A plain dense copy, on its own device, of a call's output or argument (tensors inside tuples and lists
    too; anything else as it is): what a held check call keeps until it is reported.

    In the value's own layout when dense (a straight copy): it is untimed work inside a paired block, which
    `paired.unaccounted` expects to cost alike in both children; a column-major 12 MB output took 7.6 ms to copy
    transposed, 1.7 ms as it is."""
    import torch

    if isinstance(value, (tuple, list)):
        return [plain_copy(v) for v in value] if isinstance(value, list) else tuple(plain_copy(v) for v in value)
    if isinstance(value, torch.Tensor):
        shape, stride = tuple(value.shape), tuple(value.stride())
        if value.layout == torch.strided and non_overlapping_and_dense(shape, stride):
            plain = torch.empty_strided(shape, stride, dtype=value.dtype, device=value.device)
        else:
            plain = torch.empty(shape, dtype=value.dtype, device=value.device)
        plain.copy_(value.detach())
        return plain
    return value
