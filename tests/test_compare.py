"""The float32 screen in `compare.compare_tensor` never changes a verdict or its reason."""

from __future__ import annotations

import torch

from kernelbench.harness import compare

ATOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


def _exact(got: torch.Tensor, want: torch.Tensor, monkeypatch) -> compare.Comparison:
    with monkeypatch.context() as m:
        m.setattr(compare, "_clearly_within", lambda *a: None)
        return compare.compare_tensor(got, want, ATOL, ATOL)


def test_screen_agrees_with_the_exact_comparison_near_the_boundary(monkeypatch):
    """Errors drawn around the tolerance (some just inside, some just outside), NaNs, infinities, three dtypes
    and magnitudes from 1e-3 to 1e3 (the atol scaling by the RMS): the verdict and the reason are the exact
    path's every time, and the screen did pass most in-tolerance tensors itself."""
    gen = torch.Generator().manual_seed(0)
    screened = 0
    for trial in range(600):
        dtype = (torch.float32, torch.float16, torch.bfloat16)[trial % 3]
        n = int(torch.randint(1, 64, (1,), generator=gen))
        want = (torch.randn(n, generator=gen) * 10.0 ** int(torch.randint(-3, 4, (1,), generator=gen))).to(dtype)
        tol = compare._tol(ATOL, dtype) * max(1.0, float(want.double().square().mean().sqrt()))
        noise = torch.randn(n, generator=gen) * tol * float(torch.empty(1).uniform_(0.1, 1.5, generator=gen))
        got = (want.float() + noise).to(dtype)
        if trial % 13 == 0:
            got[0] = float("nan")
        if trial % 17 == 0:
            got[-1] = float("inf")
        fast = compare.compare_tensor(got, want, ATOL, ATOL)
        exact = _exact(got, want, monkeypatch)
        assert (fast.ok, fast.reason) == (exact.ok, exact.reason), (trial, fast, exact)
        if fast.ok:
            assert abs(fast.max_abs_error - exact.max_abs_error) <= 1e-6 * max(1.0, exact.max_abs_error)
        screened += compare._clearly_within(got, want, compare._tol(ATOL, dtype), compare._tol(ATOL, dtype), True) \
            is not None
    assert screened > 120


def test_screen_leaves_overflow_and_non_finite_outputs_to_the_exact_path():
    big = torch.full((8,), 3e38)
    assert compare._clearly_within(big, big, 1e-4, 1e-4, True) is None  # the float32 sum of squares overflows
    nan = torch.tensor([1.0, float("nan")])
    assert compare._clearly_within(nan, nan, 1e-4, 1e-4, True) is None
    assert compare.compare_tensor(nan, nan, ATOL, ATOL).ok  # NaN where the reference has NaN: exact path says ok
    off = torch.tensor([1.0, 2.0])
    assert not compare.compare_tensor(off + 1e-2, off, ATOL, ATOL).ok


def test_outputs_dense_in_any_dimension_order_are_dense_and_gaps_or_overlaps_are_not():
    """The run child's density check (`outputs.flatten_output`'s `dense`) on real strided tensors: a transposed
    (column-major) or channels-last result is dense; a slice with gaps, a broadcast (expand) and a tensor with
    two dimensions on one stride are not. Written for torch 2.13, which no longer has the helper the check
    used, where the fallback (`is_contiguous`) rejected every correct column-major output."""
    import torch

    from kernelbench.harness.child.outputs import flatten_output

    def dense(t: torch.Tensor) -> bool:
        return flatten_output(t)[2][0]["dense"]

    x = torch.randn(6, 4, 5, 3)
    assert dense(x) and dense(x.transpose(0, 1)) and dense(x.permute(3, 2, 1, 0))
    assert dense(x.contiguous(memory_format=torch.channels_last)) and dense(torch.randn(7, 1, 3)[:, :, :])
    assert dense(torch.empty(0, 5)) and dense(torch.tensor(2.0))
    assert not dense(x[:, :, ::2]) and dense(x[:3])  # a leading slice is still one block
    assert not dense(x[:, :2]) and not dense(torch.randn(4, 1).expand(4, 5))
    assert not dense(torch.randn(8).as_strided((2, 2), (1, 1)))
