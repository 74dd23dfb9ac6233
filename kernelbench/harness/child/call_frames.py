"""The payload of one judged call's frame on the report pipe: a short JSON header naming each tensor's dtype
and shape, then the tensors' raw bytes (`kernelbench.harness.child.report`; the frame around it is `report.HEADER`).

Why not `torch.save`: a call's frame holds its output and its arguments afterwards (an 8 MB ReLU: 16 MB), 31
frames per evaluation of `scripts/bench_harness.py`'s ReLU. `torch.save` into memory, the copy out of it and
the frame's concatenation copied each tensor three times in the child, and `torch.load` rebuilt each storage
at ~3 ms per 8 MB in the parent: 0.4 s of a 4.3 s warm evaluation. Here the child writes each tensor's memory
into the pipe as it is, and the parent copies it once into a tensor of the declared dtype and shape.

The payload is untrusted (the candidate shares the process that writes it): `decode` accepts only the exact
layout `encode` writes (known dtypes, non-negative shapes, a byte count that adds up to the payload's length)
and raises `ValueError` on anything else; it builds plain tensors and lists, no class of the writer's choosing.
"""

from __future__ import annotations

import json
import math
import struct
import warnings
from typing import Any

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

MAGIC = b"KAT1"
PREFIX = struct.Struct(">4sII")
"""Magic, the JSON header's length in bytes, and where the first tensor's bytes start in the payload."""
ALIGN = 64
"""Each tensor's bytes start ALIGN bytes apart or more (padding with zeros), the first where the payload's
position in the pipe's stream is a multiple of ALIGN (`encode(start=)`): the parent reads the stream into one
buffer, so the tensors it reads there are aligned for their dtype and can be used in place."""
MAX_HEADER = 1 << 20
KEYS = ("outputs", "inputs_after")
"""A call record's fields (`protocol.CallRecord`): lists of tensors; `inputs_after` also holds None."""


def _dtypes() -> dict[str, Any]:
    import torch

    names = ("float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8", "uint8", "int16",
             "int32", "int64", "bool", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64")
    return {n: getattr(torch, n) for n in names if hasattr(torch, n)}


def _padding(n: int) -> int:
    return -n % ALIGN


def encode(record: dict[str, list[Any]], start: int = 0) -> list[Any]:
    """The payload of `record` (`outputs.call_record`: plain dense CPU tensors, None where an argument is no
    tensor) as a list of buffers to write in order: the header, then each tensor's memory (no copy). `start`:
    the payload's position in the stream it is written into (the first tensor starts at a multiple of ALIGN)."""
    import torch

    known = _dtypes()
    header: dict[str, list[Any]] = {}
    bodies: list[Any] = []
    for key in KEYS:
        specs: list[Any] = []
        for t in record[key]:
            if t is None:
                specs.append(None)
                continue
            if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or not t.is_contiguous():
                raise TypeError(f"{key}: a plain dense CPU tensor is expected, got {type(t).__name__}")
            name = str(t.dtype).replace("torch.", "")
            if name not in known:
                raise TypeError(f"{key}: dtype {name} has no frame encoding")
            specs.append([name, list(t.shape)])
            if t.numel():
                bodies.append(t.reshape(-1).view(torch.uint8).numpy())
        header[key] = specs
    text = json.dumps(header, separators=(",", ":")).encode()
    body = PREFIX.size + len(text)
    body += _padding(start + body)
    parts: list[Any] = [(PREFIX.pack(MAGIC, len(text), body) + text).ljust(body, b"\0")]
    for body in bodies:
        parts.append(memoryview(body))
        if _padding(body.nbytes):
            parts.append(bytes(_padding(body.nbytes)))
    return parts


def payload_size(parts: list[Any]) -> int:
    return sum(memoryview(p).nbytes for p in parts)


def _tensor(data: memoryview, pos: int, n: int, dtype: Any, shape: tuple[int, ...]) -> Any:
    """The tensor at `data[pos:pos + n]`: in place where the memory is writable and aligned for its dtype (the
    parent's read buffer, `encode(start=)`), else a copy; bool always a copy made of `!= 0` (any byte the
    writer chose is read as a valid bool)."""
    import torch

    if not n:
        return torch.empty(shape, dtype=dtype)
    with warnings.catch_warnings():  # a read-only payload (bytes) is only read here, never written
        warnings.simplefilter("ignore", UserWarning)
        raw = torch.frombuffer(data, dtype=torch.uint8, count=n, offset=pos)
    if dtype == torch.bool:
        return (raw != 0).view(shape)
    if data.readonly or raw.data_ptr() % dtype.itemsize:
        out = torch.empty(shape, dtype=dtype)
        out.reshape(-1).view(torch.uint8).copy_(raw)
        return out
    return raw.view(dtype).view(shape)


def decode(payload: bytes | bytearray | memoryview) -> dict[str, list[Any]]:
    """The call record in `payload`, as plain tensors; raises `ValueError` unless the payload is exactly what
    `encode` writes. The tensors may share the payload's memory (`_tensor`): it must not change while they are
    in use (the parent's read buffer does not once the child is gone)."""
    import torch

    data = memoryview(payload).cast("B")
    if data.nbytes < PREFIX.size:
        raise ValueError("call frame: shorter than its prefix")
    magic, size, body = PREFIX.unpack_from(data, 0)
    if magic != MAGIC or size > MAX_HEADER or not PREFIX.size + size <= body < PREFIX.size + size + ALIGN \
            or body > data.nbytes:
        raise ValueError("call frame: bad prefix")
    try:
        header = json.loads(bytes(data[PREFIX.size:PREFIX.size + size]))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"call frame: unreadable header ({e})") from None
    if not isinstance(header, dict) or sorted(header) != sorted(KEYS):
        raise ValueError("call frame: the header is not a call record's")
    known = _dtypes()
    pos = body
    record: dict[str, list[Any]] = {}
    for key in KEYS:
        specs = header[key]
        if not isinstance(specs, list):
            raise ValueError(f"call frame: {key} is not a list")
        values: list[Any] = []
        for spec in specs:
            if spec is None and key == "inputs_after":
                values.append(None)
                continue
            if not (isinstance(spec, list) and len(spec) == 2 and spec[0] in known and isinstance(spec[1], list)
                    and all(type(d) is int and d >= 0 for d in spec[1])):
                raise ValueError(f"call frame: bad tensor spec in {key}")
            dtype, shape = known[spec[0]], tuple(spec[1])
            n = math.prod(shape) * dtype.itemsize
            if pos + n > data.nbytes:  # before allocating: the header's shapes are the writer's word
                raise ValueError("call frame: shorter than its header says")
            values.append(_tensor(data, pos, n, dtype, shape))
            pos += n + _padding(n)
        record[key] = values
    if pos != data.nbytes:
        raise ValueError(f"call frame: {data.nbytes} bytes where its header accounts for {pos}")
    return record
