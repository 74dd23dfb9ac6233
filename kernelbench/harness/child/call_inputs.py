"""The inputs of every candidate call: one write path into reused buffers, and the perturbed values of the timed
and hidden check calls (DESIGN.md rules 4 and 8; the why of each is at its function, the whole in
`kernelbench.harness.child.timing`'s docstring and docs/harness.md, "Every call judged alike")."""

from __future__ import annotations

from typing import Any

import torch

SCALE_RANGE = (0.5, 2.0)
"""Range of the per-element factors of timed and check inputs (`kernelbench.harness.child.timing`'s docstring)."""


def write_inputs(buffers: list[Any], values: list[Any]) -> list[Any]:
    """THE way every candidate call's inputs arrive (DESIGN.md rule 8): one `copy_` per tensor into the reused
    buffers, whatever the call is (correctness, warm-up, timed, hidden check, verification). Returns the call's
    arguments: the buffers, and the set's own non-tensor values.

    Why one write: the buffers' metadata is what the candidate sees of how its inputs got there. Timed inputs
    used to be written by four in-place ops (the version counter rose by 4), a check's by one `copy_` (by 1) and
    a correctness call's were fresh clones (version 0): `x._version` told a timed call from a judged one exactly,
    and a candidate skipped its work on the timed ones. Now the counter rises by one per call, the storage,
    offset, strides and address are the block's, and the values are prepared beforehand in a separate tensor."""
    args = []
    for buf, val in zip(buffers, values):
        if isinstance(buf, torch.Tensor) and isinstance(val, torch.Tensor):
            buf.copy_(val)
            args.append(buf)
        else:
            args.append(val)
    return args


def load_scaled(buffers: list[Any], values: list[Any], factor: float) -> list[Any]:
    """One base set into the argument buffers, floating tensors multiplied by `factor` (1: exact copy)."""
    if factor != 1.0:
        values = [v * factor if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()) else v
                  for v in values]
    return write_inputs(buffers, values)


def fits(buffers: list[Any], values: list[Any]) -> bool:
    """Whether `values` can be written into `buffers` (same tensors' shapes, dtypes, strides and devices)."""
    if len(buffers) != len(values):
        return False
    for buf, val in zip(buffers, values):
        if isinstance(buf, torch.Tensor) != isinstance(val, torch.Tensor):
            return False
        if isinstance(buf, torch.Tensor) and (buf.shape != val.shape or buf.dtype != val.dtype
                                              or buf.stride() != val.stride() or buf.device != val.device):
            return False
    return True


FACTOR_LEVELS = 256
"""Each element's factor is one of this many evenly spaced values in SCALE_RANGE (8 random bits)."""


def _factors(like: torch.Tensor, generator: torch.Generator, device: Any) -> torch.Tensor:
    """Element-wise factors in SCALE_RANGE (one of FACTOR_LEVELS levels, independent and uniform per element),
    in `like`'s (real) dtype, on `device`.

    Why 8 bits per element: one float draw per element from a CPU generator (mt19937) cost ~40 ms per 4M
    elements, about five times the ReLU it perturbs, twice per trial (both children) -- most of an evaluation's
    wall time on CPU. Eight 64-bit draws' worth of bytes cost an eighth of that, and 256 independent levels per
    element leave no cheaper route to a timed call's output than computing it: the caching attack needs one
    factor shared by many elements. `random_` over the whole int64 range, so the top byte is uniform too."""
    low, high = SCALE_RANGE
    real = like.real.dtype if like.is_complex() else like.dtype
    levels = _levels(like, generator).to(device=device)
    return levels.to(dtype=real).mul_((high - low) / (FACTOR_LEVELS - 1)).add_(low)


def _levels(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One uniform byte per element of `like`, shaped like it, on the generator's device."""
    words = torch.empty((like.numel() + 7) // 8, dtype=torch.int64, device=generator.device)
    words.random_(-(2 ** 63), 2 ** 63 - 1, generator=generator)
    return words.view(torch.uint8)[:like.numel()].view(tuple(like.shape))


def perturbed(values: list[Any], generator: torch.Generator) -> list[Any]:
    """One base set with every floating element multiplied by its own factor from `generator` (integer tensors
    are indices and stay as they are), in fresh tensors. Positive factors keep each value's sign. The timed
    calls and the hidden check calls both take their values from here: the same numbers for the same draws."""
    out = []
    for val in values:
        if isinstance(val, torch.Tensor) and (val.is_floating_point() or val.is_complex()):
            out.append(torch.mul(val, _factors(val, generator, val.device)))
        else:
            out.append(val)
    return out


def check_inputs(values: list[Any], seed: int) -> list[Any]:
    """The inputs of a timed or hidden check call on base set `values` from `seed`: the factors from a
    generator on the set's device seeded with `seed` (the same numbers for the same seed on one device:
    the reference child makes a check's inputs as the run child does, and sends their digests to the parent,
    `compare.inputs_match`), in fresh tensors (integer tensors cloned)."""
    device = next((v.device for v in values if isinstance(v, torch.Tensor)), torch.device("cpu"))
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return [v.clone() if isinstance(v, torch.Tensor) and not (v.is_floating_point() or v.is_complex()) else v
            for v in perturbed(values, generator)]


def fresh_buffers(values: list[Any]) -> list[Any]:
    """A block's argument buffers, shaped like `values` (clones: dense, the same strides, version 0)."""
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]
