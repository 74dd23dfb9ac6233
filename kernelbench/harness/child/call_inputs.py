"""The inputs of every candidate call: one write path into reused buffers, and the perturbed values of the timed
and hidden check calls (DESIGN.md rules 4 and 8; the why of each is at its function, the whole in
`kernelbench.harness.child.timing`'s docstring and docs/harness.md, "Every call judged alike")."""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy.random
import torch

_PCG64 = numpy.random.PCG64
"""Captured at import, before any candidate code (the worker imports this module first): a candidate that
rebinds `numpy.random.PCG64` afterwards does not choose its own timed inputs; and imported here, since a
sandboxed child may no longer map a new library once the candidate is loaded."""

_LIBC = ctypes.CDLL(None, use_errno=True)
_MEMALIGN, _FREE = _LIBC.posix_memalign, _LIBC.free
"""glibc's own allocation calls, captured at import like `_PCG64`: the CPU levels' memory (`_Scratch`)."""
_FREE.argtypes = [ctypes.c_void_p]

SCALE_RANGE = (0.5, 2.0)
"""Range of the per-element factors of timed and check inputs (`kernelbench.harness.child.timing`'s docstring)."""


def write_inputs(buffers: list[Any], values: list[Any]) -> list[Any]:
    """THE way every candidate call's inputs arrive (DESIGN.md rule 8): one write per tensor into the reused
    buffers, whatever the call is (correctness, warm-up, timed, hidden check, verification). Returns the call's
    arguments: the buffers, and the set's own non-tensor values.

    Why one write: the buffers' metadata is what the candidate sees of how its inputs got there. Timed inputs
    used to be written by four in-place ops (the version counter rose by 4), a check's by one `copy_` (by 1) and
    a correctness call's were fresh clones (version 0): `x._version` told a timed call from a judged one exactly,
    and a candidate skipped its work on the timed ones. Now the counter rises by one per call, the storage,
    offset, strides and address are the block's: here by a `copy_` of values prepared beforehand, for the
    perturbed values of timed and check calls by the one `out=` op that computes them (`Perturbation.write`)."""
    args = []
    for buf, val in zip(buffers, values):
        if isinstance(buf, torch.Tensor) and isinstance(val, torch.Tensor):
            buf.copy_(val)
            args.append(buf)
        else:
            args.append(val)
    return args


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


def _levels(like: torch.Tensor, seed: int, index: int) -> torch.Tensor:
    """One uniform byte per element of `like`, shaped like it, on its device, from `seed` and the tensor's
    position `index` in its set (the same bytes for the same pair on one device; equal tensors of one set
    still get their own draws).

    Why these generators: on the CPU the bytes of numpy's PCG64 (`random_raw`, eight per 64-bit word) cost
    0.43 ms per 2M elements where torch's CPU generator (mt19937, `random_`) cost 0.96 ms, twice per trial
    (both children); on a GPU torch's device generator draws them in place. Why 8 bits: `_factor_terms`."""
    n = like.numel()
    if like.device.type == "cpu":
        words = _PCG64([int(seed), int(index)]).random_raw((n + 7) // 8)
        return torch.from_numpy(words.view("u1")[:n]).view(tuple(like.shape))
    generator = torch.Generator(device=like.device)
    generator.manual_seed((int(seed) * 1_000_003 + int(index)) % 2 ** 63)
    words = torch.empty((n + 7) // 8, dtype=torch.int64, device=like.device)
    words.random_(-(2 ** 63), 2 ** 63 - 1, generator=generator)  # the whole range: the top byte is uniform too
    return words.view(torch.uint8)[:n].view(tuple(like.shape))


def _is_scaled(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


class Perturbation:
    """The perturbed values of one base set: every floating ELEMENT multiplied by its own factor, one of
    FACTOR_LEVELS evenly spaced values in SCALE_RANGE drawn from a seed (integer tensors are indices and stay
    as they are). Positive factors keep each value's sign.

    Computed as `low * v + step * v * level` with `low * v` and `step * v` kept per base set, so a call costs
    a byte draw, one cast and one `addcmul` (0.43 + 0.43 + 1.2 ms per 2M elements on a 2-core VM, where
    drawing factors, scaling them and multiplying took 3.5 ms). The cost: the two terms hold twice the floating
    tensors of each timing set, in the timing child's own memory (its rlimits and cgroup count them).

    Why 8 bits per element: one float draw per element cost five times the ReLU it perturbs; 256 independent
    levels per element leave no cheaper route to a call's output than computing it: the caching attack needs
    one factor shared by many elements (`kernelbench.harness.child.timing`'s docstring)."""

    def __init__(self, values: list[Any]):
        low, high = SCALE_RANGE
        step = (high - low) / (FACTOR_LEVELS - 1)
        self.values = values
        self.terms = [(torch.mul(v, low), torch.mul(v, step)) if _is_scaled(v) else None for v in values]

    def _factor_levels(self, i: int, seed: int, scratch: "_Scratch | None" = None) -> torch.Tensor:
        """Input `i`'s factor levels for `seed`, in its own dtype (a complex input's too, so the `addcmul` that
        writes it has one dtype throughout and makes no cast copy of its own): in `scratch` where given (the CPU
        write path), else in a tensor of torch's (a device's levels: in a buffer kept for input `i` of this
        shape, `_LEVELS`; `fresh`'s: a temporary)."""
        like = self.terms[i][0]
        drawn = _levels(like, seed, i)
        if scratch is not None:
            out = scratch.tensor_like(like)
        elif like.device.type != "cpu":
            key = (i, tuple(like.shape), like.dtype, like.device)
            out = _LEVELS.get(key)
            if out is None:
                out = _LEVELS[key] = torch.empty(like.shape, dtype=like.dtype, device=like.device)
        else:
            return drawn.to(dtype=like.dtype)
        out.copy_(drawn)
        return out

    def fresh(self, seed: int) -> list[Any]:
        """The values for `seed`, in fresh tensors (integer tensors cloned)."""
        return [torch.addcmul(t[0], t[1], self._factor_levels(i, seed)) if t is not None
                else (v.clone() if isinstance(v, torch.Tensor) else v)
                for i, (v, t) in enumerate(zip(self.values, self.terms))]

    def write(self, buffers: list[Any], seed: int) -> list[Any]:
        """The values for `seed` written into `buffers`, one write per tensor as `write_inputs` does (the
        floating ones by the `addcmul` that computes them, `out=` the buffer: its version counter rises by
        one, as a `copy_`'s does); returns the call's arguments.

        Why every input's levels first, and none of their memory torch's on the CPU: nothing a candidate can
        hook may run between a call's last write and the call. A freed temporary runs its allocator's deleter,
        and a candidate that replaced the CPU allocator (found in libc10's symbol table, no import) had its
        deleter compute the call's answer from the freshly written buffer with ATen's own multiply, between the
        calls where only the harness's kernels are expected: `tests/adversarial/found_allocator_aten.py`,
        `correct` at 14.8x on L1/26 before, when the levels were a torch temporary freed right after the
        `addcmul`. On the CPU the levels now live in memory from glibc itself (`_Scratch`), freed after the
        writes by glibc's `free`, which no allocator of torch's sees; on a device, in kept buffers (`_LEVELS`).
        Why still freed before the call on the CPU: the call's output then lands in the memory the `addcmul`
        just read, as it did with the temporary; with the levels kept alive instead, the memory-bound speedup's
        CV went from 1.7-2.3 % to 3.7-4.7 % (the bench's ReLU, 16 evaluations a side, interleaved)."""
        scratch = _Scratch()
        try:
            levels = [self._factor_levels(i, seed, scratch if t[0].device.type == "cpu" else None) if t is not None
                      else None for i, t in enumerate(self.terms)]
            args = write_inputs(buffers, [None if t is not None else v for v, t in zip(self.values, self.terms)])
            for i, (buf, t) in enumerate(zip(buffers, self.terms)):
                if t is not None:
                    args[i] = torch.addcmul(t[0], t[1], levels[i], out=buf)
            levels.clear()  # the only references to the scratch's tensors: gone before its memory is
        finally:
            scratch.free()
        return args


class _Scratch:
    """CPU memory for one write's levels from glibc's `posix_memalign` and `free` (captured at import), aligned
    as c10's CPU allocator aligns a tensor of that size (a page from 2 MiB under `THP_MEM_ALLOC_ENABLE`, the
    children's setting; else 64 bytes), so the call's output, allocated next, takes the same memory back.
    Why not torch's allocator: see `Perturbation.write`."""

    def __init__(self) -> None:
        self.blocks: list[int] = []

    def tensor_like(self, like: torch.Tensor) -> torch.Tensor:
        nbytes = like.numel() * like.element_size()
        thp = os.environ.get("THP_MEM_ALLOC_ENABLE") == "1" and nbytes >= 2 << 20
        ptr = ctypes.c_void_p()
        if _MEMALIGN(ctypes.byref(ptr), 4096 if thp else 64, max(nbytes, 1)) != 0 or not ptr.value:
            raise MemoryError(f"posix_memalign of {nbytes} bytes for the timed inputs' levels failed")
        self.blocks.append(ptr.value)
        if nbytes == 0:
            return torch.empty(like.shape, dtype=like.dtype)
        memory = (ctypes.c_char * nbytes).from_address(ptr.value)
        return torch.frombuffer(memory, dtype=like.dtype).view(like.shape)

    def free(self) -> None:
        for ptr in self.blocks:
            _FREE(ptr)
        self.blocks.clear()


_LEVELS: dict[tuple[Any, ...], torch.Tensor] = {}
"""A device's factor-level buffers by (input position, shape, dtype, device), kept for the process's life
(`Perturbation._factor_levels`): one per input of the timed shape, as large as that input."""


def check_inputs(values: list[Any], seed: int) -> list[Any]:
    """The inputs of a timed or hidden check call on base set `values` from `seed` (`Perturbation`), in fresh
    tensors: the same numbers for the same seed on one device, so the reference child makes a check's inputs
    as the run child does and sends their digests to the parent (`compare.inputs_match`)."""
    return Perturbation(values).fresh(seed)


def fresh_buffers(values: list[Any]) -> list[Any]:
    """A block's argument buffers, shaped like `values` (clones: dense, the same strides, version 0)."""
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]
