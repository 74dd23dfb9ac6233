"""The float32 screen in `compare.compare_tensor` never changes a verdict or its reason."""

from __future__ import annotations

import pytest
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


def test_the_screen_in_steps_finds_an_error_in_any_step_and_agrees_with_the_exact_path():
    """`compare._clearly_within` works in steps of SCREEN_CHUNK elements (no parallel region in the parent): an
    error past the tolerance in the last step, or a NaN in a middle one, still fails, and the largest error is
    the whole tensor's."""
    import torch

    from kernelbench.harness import compare

    n = 3 * compare.SCREEN_CHUNK + 17
    want = torch.randn(n)
    got = want.clone()
    got[5] += 1e-6
    got[-1] += 3e-6
    assert compare._clearly_within(got, want, 1e-4, 1e-4, True) == pytest.approx(3e-6, rel=0.05)
    bad = want.clone()
    bad[-1] += 1.0
    assert compare._clearly_within(bad, want, 1e-4, 1e-4, True) is None
    assert not compare.compare_tensor(bad, want, {"float32": 1e-4}, {"float32": 1e-4}).ok
    nan = want.clone()
    nan[compare.SCREEN_CHUNK + 3] = float("nan")
    assert compare._clearly_within(nan, want, 1e-4, 1e-4, True) is None
    changed = want.clone()
    changed[-2] += 1e-3
    assert "modified in place" in compare.inputs_unchanged([want], [changed])
    assert compare.inputs_unchanged([want], [want.clone()]) == ""


def test_the_float32_screen_in_numpy_decides_as_the_steps_in_torch_do():
    """The numpy screen (float32 on the CPU) and the torch steps agree on every case: within, past the bound by
    a hair in the last element, a NaN or an infinity on either side, infinities on both, signed zeros, an
    output whose float32 squares overflow, and without the RMS scale."""
    import torch

    from kernelbench.harness import compare

    n = 2 * compare.NUMPY_CHUNK + 5
    want = torch.randn(n) * 3
    cases = {"within": want + 1e-5 * torch.randn(n)}
    bound = (want[-1].abs() * 1e-4 + 1e-4 * float(want.double().square().mean().sqrt())) * compare.FAST_MARGIN
    hair = want.clone()
    hair[-1] += float(bound) * 1.01
    cases["past the bound in the last element"] = hair
    for what, value in (("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf"))):
        one = want.clone()
        one[compare.NUMPY_CHUNK + 1] = value
        cases[f"{what} in got"] = one
    zeros = want.clone()
    zeros[:10] = -0.0
    cases["signed zeros"] = zeros
    for name, got in cases.items():
        for scale in (True, False):
            fast = compare._clearly_within(got, want, 1e-4, 1e-4, scale)
            steps = compare._clearly_within_steps(got, want, 1e-4, 1e-4, scale)
            assert (fast is None) == (steps is None), (name, scale, fast, steps)
            if fast is not None:
                assert fast == pytest.approx(steps, rel=1e-6), name
    for value in (float("nan"), float("inf")):  # on the reference's side, and on both
        w = want.clone()
        w[7] = value
        for got in (want, w):
            assert compare._clearly_within(got, w, 1e-4, 1e-4, True) is None
            assert compare._clearly_within(got, w, 1e-4, 1e-4, False) is None
    big = torch.full((n,), 3e19)
    assert compare._clearly_within(big, big, 1e-4, 1e-4, True) is None  # the float32 squares overflow
    zeros_w = want.clone()
    zeros_w[:10] = 0.0
    assert compare._clearly_within(zeros, zeros_w, 1e-4, 1e-4, True) is not None  # -0.0 and 0.0 agree
