"""Comparing a candidate's returned tensors with the reference's, in the parent.

DESIGN.md rule 3: same structure, shape, dtype and device; no tensor subclasses; dense, non-overlapping
strides; NaN positions agree; values within per-dtype atol/rtol (KernelBench HEAD: 1e-4 fp32, 1e-2
fp16/bf16); inputs unchanged by the call. Tensors arrive here from `call_frames.decode`, so they
are plain tensors whatever the child did; the metadata the child recorded before converting them is what
reveals a subclass or odd strides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kernelbench.harness.child.outputs import tensor_digest

MAX_POSITIONS = 3


@dataclass(frozen=True)
class Comparison:
    """Verdict on one input set (or the whole evaluation, when merged)."""

    ok: bool
    reason: str = ""
    """Empty when ok; else one line saying what differs."""
    max_abs_error: float = 0.0
    output_index: int = -1
    """Which output (flattened order) differed most; -1 when not a value mismatch."""
    positions: tuple[str, ...] = ()
    """A few `index: got vs expected` strings for the feedback."""


def _tol(table: dict[str, float], dtype: torch.dtype) -> float:
    name = str(dtype).replace("torch.", "")
    return table.get(name, table.get("float32", 1e-4))


def _positions(got: torch.Tensor, want: torch.Tensor, bad: torch.Tensor) -> tuple[str, ...]:
    idx = bad.nonzero()[:MAX_POSITIONS]
    out = []
    for row in idx.tolist():
        i = tuple(row)
        out.append(f"{list(i)}: got {got[i].item():.6g}, expected {want[i].item():.6g}")
    return tuple(out)


def atol_scale(want: torch.Tensor) -> float:
    """RMS of the reference's finite values, floored at 1: the factor the absolute tolerance is multiplied by.

    Why: fp32 results that sum many terms (matmul, conv, long reductions) differ between two correct
    summation orders by about eps·sqrt(K)·|term|, which grows with the output's magnitude, not with each
    entry's. With a fixed atol, entries near zero of a large-magnitude output fail for every kernel but the
    reference's own library call (seen on the built-in matmuls at K=64 with inputs ×3, and expected at K=4096).
    Scaling atol by the output's RMS keeps 1e-4 as a relative bound on the output's scale; a bf16 downgrade
    (relative error ~4e-3) still fails by ~40×. Outputs with RMS <= 1 keep the plain atol.
    """
    w = want.double()
    finite = torch.isfinite(w)
    if not finite.any():
        return 1.0
    return max(1.0, float(w[finite].square().mean().sqrt()))


FAST_MARGIN = 0.999
"""The float32 screen passes a tensor only when every element is within this share of its tolerance."""


SCREEN_CHUNK = 32768
"""Elements per step of the parent's float32 screen and of its input check: ATen's grain size, so none of their
ops opens a parallel region. Why: the parent judges while other processes run (the children, a policy, other
evaluations), and with two intra-op threads on a busy 2-core VM each parallel op waited for a descheduled
thread: the verdict of `scripts/bench_harness.py`'s ReLU (31 calls of 8 MB) took 4.1-4.5 s in `kernel-agent
eval` beside a training run, 1.05 s with one thread. In steps of this size one thread does it whatever the
process's setting, with ~64 op calls per 2M elements of overhead."""


def _steps(t: torch.Tensor) -> list[torch.Tensor]:
    """`t` flattened, in views of at most SCREEN_CHUNK elements."""
    flat = t.reshape(-1)
    return [flat[i:i + SCREEN_CHUNK] for i in range(0, flat.numel(), SCREEN_CHUNK)]


def _clearly_within(got: torch.Tensor, want: torch.Tensor, a: float, r: float, scale_atol: bool) -> float | None:
    """The largest absolute error when every element is finite and well inside the tolerance, computed in
    float32; None when any is not (then the exact float64 comparison below decides and explains).

    Why: the float64 comparison makes about fifteen passes over float64 copies (0.4 s for one 4M-element output
    on a 2-core VM, thirty outputs per evaluation). This screen makes about six float32 passes, in steps of
    SCREEN_CHUNK elements. Its rounding (relative 1e-7 of values, differences and the RMS, whose chunks' sums of
    squares add up in float64) is far below the 0.1 % margin it keeps, so a tensor it passes is one the exact
    path passes; a tensor near the boundary, or with a NaN or an infinity, goes to the exact path, so verdicts
    and their reasons are those of the exact path."""
    if got.dtype not in (torch.float32, torch.float16, torch.bfloat16) or got.numel() == 0:
        return None
    if got.dtype == torch.float32 and got.device.type == "cpu" and want.device.type == "cpu":
        return _clearly_within_f32(got.detach().reshape(-1).numpy(), want.detach().reshape(-1).numpy(), a, r, scale_atol)
    return _clearly_within_steps(got, want, a, r, scale_atol)


def _clearly_within_steps(got: torch.Tensor, want: torch.Tensor, a: float, r: float, scale_atol: bool) -> float | None:
    """`_clearly_within` in torch, in steps of SCREEN_CHUNK elements (float16, bfloat16, tensors off the CPU)."""
    pairs = list(zip(_steps(got), _steps(want)))
    if scale_atol:
        squares = 0.0
        for _, w in pairs:
            squares += float(torch.linalg.vector_norm(w.float())) ** 2
        rms = math.sqrt(squares / got.numel())
        if not math.isfinite(rms):  # a NaN or infinity, or a float32 overflow of a chunk's norm: the exact path
            return None
        a *= max(1.0, rms)
    worst = 0.0
    for g, w in pairs:
        g, w = g.float(), w.float()
        if not (bool(torch.isfinite(w).all()) and bool(torch.isfinite(g).all())):
            return None
        diff = torch.sub(g, w).abs_()
        bound = torch.abs(w).mul_(r).add_(a).mul_(FAST_MARGIN)
        if bool(torch.gt(diff, bound).any()):
            return None
        worst = max(worst, float(diff.max()))
    return worst


NUMPY_CHUNK = 65536
"""Elements per step of the float32 screen in numpy: two 256 KB scratch arrays that stay in a core's L2."""


def _clearly_within_f32(g: np.ndarray, w: np.ndarray, a: float, r: float, scale_atol: bool) -> float | None:
    """`_clearly_within` for float32 on the CPU, in numpy: the same bound, the same order of operations, the
    same margin; 4.5x faster (3.4 ms against 15.5 ms per 2M elements on a 2-core VM; about twenty outputs
    per evaluation). Why numpy: its ufuncs never start threads (the reason for SCREEN_CHUNK) and cost about a
    microsecond per call where a torch op costs several, so the steps stay small enough for the cache.
    Non-finite values need no pass of their own: a NaN or infinity in either tensor makes `|g - w| - bound`
    NaN or positive somewhere (inf - inf is NaN), and a NaN maximum fails `<= 0`, so such a tensor goes to
    the exact path as before."""
    with np.errstate(all="ignore"):  # NaN and infinities are expected here and decided below
        return _f32_screen(g, w, a, r, scale_atol)


def _f32_screen(g: np.ndarray, w: np.ndarray, a: float, r: float, scale_atol: bool) -> float | None:
    n = g.size
    step = min(NUMPY_CHUNK, n)
    d, b = np.empty(step, np.float32), np.empty(step, np.float32)
    if scale_atol:
        squares = 0.0
        for i in range(0, n, step):
            wc = w[i:i + step]
            dc = d[:wc.size]
            np.multiply(wc, wc, out=dc)
            squares += float(dc.sum(dtype=np.float64))
        rms = math.sqrt(squares / n)
        if not math.isfinite(rms):
            return None
        a *= max(1.0, rms)
    r32, a32, margin = np.float32(r), np.float32(a), np.float32(FAST_MARGIN)
    worst = 0.0
    for i in range(0, n, step):
        gc, wc = g[i:i + step], w[i:i + step]
        dc, bc = d[:wc.size], b[:wc.size]
        np.subtract(gc, wc, out=dc)
        np.abs(dc, out=dc)
        np.abs(wc, out=bc)
        bc *= r32
        bc += a32
        bc *= margin
        np.subtract(dc, bc, out=bc)  # <= 0 exactly where |g - w| <= bound (a rounded difference keeps its sign)
        if not bc.max() <= 0:
            return None
        worst = max(worst, float(dc.max()))
    return worst


def compare_tensor(got: torch.Tensor, want: torch.Tensor, atol: dict[str, float], rtol: dict[str, float],
                   scale_atol: bool = True) -> Comparison:
    if got.shape != want.shape:
        return Comparison(False, f"shape {list(got.shape)} != expected {list(want.shape)}")
    if got.dtype != want.dtype:
        return Comparison(False, f"dtype {got.dtype} != expected {want.dtype}")
    if got.is_floating_point():
        max_err = _clearly_within(got, want, _tol(atol, got.dtype), _tol(rtol, got.dtype), scale_atol)
        if max_err is not None:
            return Comparison(True, "", max_err)
    if not (got.is_floating_point() or got.is_complex()):
        bad = got != want
        if bad.any():
            return Comparison(False, f"{int(bad.sum())} of {bad.numel()} elements differ", 0.0, -1,
                              _positions(got, want, bad))
        return Comparison(True)
    g, w = got.double(), want.double()
    nan_g, nan_w = torch.isnan(g), torch.isnan(w)
    if not torch.equal(nan_g, nan_w):
        bad = nan_g != nan_w
        return Comparison(False, f"NaN positions disagree at {int(bad.sum())} elements", float("nan"), -1,
                          _positions(got, want, bad))
    a, r = _tol(atol, got.dtype), _tol(rtol, got.dtype)
    if scale_atol:
        a *= atol_scale(want)
    finite = ~nan_w
    diff = (g - w).abs().masked_fill(~finite, 0.0)
    inf_mismatch = (torch.isinf(g) | torch.isinf(w)) & (g != w) & finite
    diff = diff.masked_fill(inf_mismatch, float("inf")).nan_to_num(nan=0.0)
    bad = (diff > a + r * w.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)) | inf_mismatch
    max_err = float(diff.max()) if diff.numel() else 0.0
    if bad.any():
        return Comparison(False, f"{int(bad.sum())} of {bad.numel()} elements outside atol={a:g} rtol={r:g} "
                          f"(max abs error {max_err:.3g})", max_err, -1, _positions(got, want, bad))
    return Comparison(True, "", max_err)


def compare_outputs(got: list[torch.Tensor], want: list[torch.Tensor], meta: list[dict[str, Any]],
                    device: str, atol: dict[str, float], rtol: dict[str, float], scale_atol: bool = True) -> Comparison:
    """One input set: the candidate's flattened outputs against the reference's."""
    if len(got) != len(want):
        return Comparison(False, f"returned {len(got)} tensors, expected {len(want)}")
    worst = Comparison(True)
    for i, (g, w) in enumerate(zip(got, want)):
        m = meta[i] if i < len(meta) else {}
        if not isinstance(g, torch.Tensor) or type(g) is not torch.Tensor:
            return Comparison(False, f"output {i} is not a plain tensor", output_index=i)
        if meta and not m.get("exact_tensor", False):
            return Comparison(False, f"output {i} is a tensor subclass ({m.get('type')}); return plain tensors", output_index=i)
        if meta and m.get("device") != device:
            return Comparison(False, f"output {i} is on {m.get('device')}, expected {device}", output_index=i)
        if meta and (not m.get("dense", False) or m.get("layout") != "torch.strided"):
            return Comparison(False, f"output {i} has overlapping or non-dense strides / a sparse layout", output_index=i)
        c = compare_tensor(g, w, atol, rtol, scale_atol)
        if not c.ok:
            return Comparison(False, f"output {i}: {c.reason}", c.max_abs_error, i, c.positions)
        if c.max_abs_error > worst.max_abs_error:
            worst = Comparison(True, "", c.max_abs_error, i)
    return worst


def inputs_unchanged(before: list[Any], after: list[Any]) -> str:
    """Empty when every tensor argument is bit-identical after the call; else which one changed."""
    for i, (b, a) in enumerate(zip(before, after)):
        if not isinstance(b, torch.Tensor):
            continue
        if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return f"input {i} was replaced"
        same = all(torch.equal(x, y) or (y.is_floating_point() and torch.equal(torch.isnan(x), torch.isnan(y))
                                         and torch.equal(x.nan_to_num(0.0), y.nan_to_num(0.0)))
                   for x, y in zip(_steps(a), _steps(b)))  # in steps: `SCREEN_CHUNK`
        if not same:
            return f"input {i} was modified in place (inputs must be left unchanged)"
    return ""


class Digest(str):
    """A tensor's digest the parent computed itself (`verdict._candidate_calls`); a plain string from a child's
    frame is never one (`call_frames.decode` builds tensors and lists only), so it cannot pass for it."""


def inputs_match(digests: list[str | None], after: list[Any]) -> str:
    """Empty when every tensor argument after the call has the digest its inputs had before it (the reference
    child's `input_digests` of the same call's inputs); else which one changed.

    Why digests for the hidden check calls: their inputs are made on the evaluation's device from a seed
    (`call_inputs.check_inputs`, the same function as every timed call's, so the time it takes cannot tell a
    check from a timed call), which the parent, with no device of its own, cannot redo; the reference child,
    trusted, makes the same inputs and sends their digests."""
    for i, want in enumerate(digests):
        if want is None:
            continue
        a = after[i] if i < len(after) else None
        got = tensor_digest(a) if isinstance(a, torch.Tensor) else a if isinstance(a, Digest) else None
        if got is None or got != want:
            return f"input {i} was modified in place or replaced (inputs must be left unchanged)"
    return ""
