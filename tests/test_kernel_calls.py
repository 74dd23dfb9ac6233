"""Kernel-call counting: loader wrapping, idempotence, restore, and the cupy path.

The real compiled-extension path is tested in tests/test_op_policy.py (one shared build). cupy is not
installed on CPU machines, so its path runs here against a stand-in module with the same two classes.
"""

from __future__ import annotations

import math
import sys
import types

import pytest
import torch.utils.cpp_extension as cpp_extension

from kernelbench.harness.child import kernel_calls
from kernel_calls_restore import uninstall


def fake_extension() -> types.ModuleType:
    """A module shaped like a pybind extension: builtin functions plus non-function attributes."""
    mod = types.ModuleType("fake_ext")
    mod.sqrt, mod.hypot, mod.VERSION = math.sqrt, math.hypot, "1"
    return mod


@pytest.fixture
def fake_loaders(monkeypatch):
    """Stand-ins for load_inline/load, so wrapping is tested without a compile."""
    made: list[types.ModuleType] = []

    def load_inline(name, cpp_sources, functions=None, is_python_module=True, **kw):
        if not is_python_module:
            return f"/tmp/{name}.so"
        made.append(fake_extension())
        return made[-1]

    monkeypatch.setattr(cpp_extension, "load_inline", load_inline)
    monkeypatch.setattr(cpp_extension, "load", lambda name, sources, **kw: fake_extension())
    yield made
    uninstall()


def test_install_wraps_loaders_and_counts(fake_loaders):
    kernel_calls.install()
    from torch.utils.cpp_extension import load_inline  # bound after install, as a candidate would

    mod = load_inline("m", "src", functions=["sqrt"])
    kernel_calls.reset()
    assert mod.sqrt(16.0) == 4.0 and mod.hypot(3.0, 4.0) == 5.0 and mod.VERSION == "1"
    kept = mod.sqrt
    kept(4.0)
    assert kernel_calls.count() == 3
    kernel_calls.reset()
    assert kernel_calls.count() == 0
    with pytest.raises(TypeError):
        mod.sqrt("x")  # errors of the wrapped function come through unchanged
    assert kernel_calls.count() == 1
    assert cpp_extension.load("n", ["a.cpp"]).sqrt(1.0) == 1.0 and kernel_calls.count() == 2


def test_install_is_idempotent_and_uninstall_restores(fake_loaders):
    before = cpp_extension.load_inline
    kernel_calls.install()
    wrapped = cpp_extension.load_inline
    kernel_calls.install()
    assert cpp_extension.load_inline is wrapped and wrapped is not before
    mod = cpp_extension.load_inline("m", "src")
    assert mod.sqrt is not math.sqrt and not hasattr(mod.sqrt, "__wrapped__")
    assert kernel_calls.wrap_module(mod).sqrt is mod.sqrt  # wrapping twice would count twice
    uninstall()
    assert cpp_extension.load_inline is before
    assert cpp_extension.load_inline("m", "src").sqrt is math.sqrt


def test_non_module_results_pass_through(fake_loaders):
    kernel_calls.install()
    assert cpp_extension.load_inline("lib", "src", is_python_module=False) == "/tmp/lib.so"


def test_install_does_not_import_cupy_when_absent(fake_loaders):
    if "cupy" in sys.modules:
        pytest.skip("cupy is imported in this process")
    kernel_calls.install()
    assert "cupy" not in sys.modules


def fake_cupy() -> types.ModuleType:
    """The two cupy classes the counter replaces, with cupy's call shapes (grid, block, args)."""
    cupy = types.ModuleType("cupy")

    class RawKernel:
        def __init__(self, code, name):
            self.code, self.name, self.launches = code, name, []

        def __call__(self, grid, block, args, **kw):
            self.launches.append((grid, block, args))
            return None

    class RawModule:
        def __init__(self, code=None):
            self.code = code

        def get_function(self, name):
            return RawKernel(self.code, name)

    cupy.RawKernel, cupy.RawModule = RawKernel, RawModule
    return cupy


def test_cupy_kernels_count_launches():
    cupy = fake_cupy()
    raw_kernel, raw_module = cupy.RawKernel, cupy.RawModule
    kernel_calls.install_cupy(cupy)
    try:
        kernel_calls.reset()
        k = cupy.RawKernel("extern \"C\" __global__ void f() {}", "f")
        k((1,), (32,), ())
        fn = cupy.RawModule(code="...").get_function("g")
        fn((2,), (64,), (1, 2))
        fn((2,), (64,), (3, 4))
        assert kernel_calls.count() == 3
        assert isinstance(k, raw_kernel) and fn.name == "g" and fn.launches == [((2,), (64,), (1, 2)),
                                                                                ((2,), (64,), (3, 4))]
    finally:
        uninstall()
    assert cupy.RawKernel is raw_kernel and cupy.RawModule is raw_module


@pytest.mark.gpu
def test_real_cupy_kernels_count_launches():
    cupy = pytest.importorskip("cupy")
    kernel_calls.install()
    try:
        code = r'''extern "C" __global__ void twice(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = 2.f * x[i];
        }'''
        x = cupy.arange(1000, dtype=cupy.float32)
        y = cupy.empty_like(x)
        kernel_calls.reset()
        fn = cupy.RawModule(code=code).get_function("twice")
        fn((4,), (256,), (x, y, cupy.int32(x.size)))
        cupy.RawKernel(code, "twice")((4,), (256,), (x, y, cupy.int32(x.size)))
        assert kernel_calls.count() == 2
        assert bool((y == 2 * x).all()) and fn.attributes["max_threads_per_block"] > 0
    finally:
        uninstall()
