"""Dynamic op policy: op classification, the dispatch tracer on real torch ops and on a real C++ extension
(built once per session in `build_cache_dir`), and kernel-call counting on that extension."""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

from kernelbench.harness.child import kernel_calls
from kernelbench.harness.child.op_policy import OpTracer, classify_op, judge_ops
from kernel_calls_restore import uninstall

PROBE_CPP = r"""
#include <torch/extension.h>

// A "kernel" that only forwards to ATen: the op tracer must see aten.relu inside it.
torch::Tensor relu_aten(torch::Tensor x) { return at::relu(x); }

// A "kernel" that hides a matmul behind the extension boundary.
torch::Tensor mm_aten(torch::Tensor a, torch::Tensor b) { return at::matmul(a, b); }

// A real kernel: allocation plus an open-coded loop, no ATen compute.
torch::Tensor relu_loop(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

// The cheapest possible call, to measure the counting wrapper's overhead.
int64_t ident(int64_t v) { return v; }
"""


@pytest.fixture(scope="module")
def probe(build_cache_dir):
    build = os.path.join(build_cache_dir, "op_policy_probe")
    os.makedirs(build, exist_ok=True)
    kernel_calls.install()
    try:
        yield cpp_extension.load_inline(name="ka_op_policy_probe", cpp_sources=PROBE_CPP,
                                        functions=["relu_aten", "mm_aten", "relu_loop", "ident"],
                                        build_directory=build, extra_cflags=["-O2"])
    finally:
        uninstall()


@pytest.mark.parametrize("name,kind", [
    ("aten.empty.memory_format", "alloc"), ("aten.empty_like.default", "alloc"), ("aten.zeros.default", "alloc"),
    ("aten.full.default", "alloc"), ("aten.fill_.Scalar", "alloc"), ("aten.fill_.Tensor", "compute"),
    ("aten.view.default", "view"), ("aten.t.default", "view"), ("aten.slice.Tensor", "view"),
    ("aten.expand.default", "view"), ("aten.sym_size.int", "meta"), ("aten.is_contiguous.default", "meta"),
    ("aten.clone.default", "copy"), ("aten._to_copy.default", "copy"), ("aten.copy_.default", "copy"),
    ("aten.relu.default", "compute"), ("aten.mm.default", "compute"), ("aten.add.Tensor", "compute"),
    ("aten.sum.dim_IntList", "compute"), ("myops.fast_relu.default", "compute"), ("relu", "compute"),
])
def test_classify_op(name, kind):
    assert classify_op(name) == kind


def test_tracer_records_real_ops_in_order():
    x = torch.randn(4, 8)
    with OpTracer() as tracer:
        y = torch.empty_like(x)
        z = x.t().contiguous()
        torch.relu_(y.copy_(x))
        w = torch.softmax(z, dim=0).sum()
    assert tracer.ops[0] == "aten.empty_like.default"
    assert tracer.ops.index("aten.t.default") < tracer.ops.index("aten.clone.default")
    assert "aten.relu_.default" in tracer.ops and "aten.copy_.default" in tracer.ops
    assert any(op.startswith("aten._softmax") for op in tracer.ops)
    assert w.shape == () and torch.allclose(y, x.clamp_min(0))
    with OpTracer() as idle:
        pass
    assert idle.ops == []


def test_judge_strict_and_partial():
    ops = ["aten.empty_like.default", "aten.view.default", "aten.clone.default"]
    assert judge_ops(ops, "strict", kernel_calls=1) == []
    compute = ops + ["aten.mm.default", "aten.add.Tensor", "aten.mm.default"]
    (v,) = judge_ops(compute, "strict", kernel_calls=1)
    assert v.flag == "dynamic:torch_compute_op" and "aten.mm.default, aten.add.Tensor" in v.reason and "3 " in v.reason
    assert judge_ops(compute, "partial", kernel_calls=2) == []
    for policy in ("strict", "partial"):
        assert "dynamic:kernel_not_called" in {v.flag for v in judge_ops(ops, policy, kernel_calls=0)}
    with pytest.raises(ValueError):
        judge_ops(ops, "lenient", kernel_calls=1)


def test_tracer_sees_aten_called_inside_a_cpp_extension(probe):
    x, a, b = torch.randn(64), torch.randn(8, 16), torch.randn(16, 4)
    kernel_calls.reset()
    with OpTracer() as tracer:
        y = probe.relu_aten(x)
        m = probe.mm_aten(a, b)
    assert "aten.relu.default" in tracer.ops
    assert any(op in tracer.ops for op in ("aten.mm.default", "aten.matmul.default"))
    assert torch.equal(y, torch.relu(x)) and torch.allclose(m, a @ b)
    assert kernel_calls.count() == 2
    flags = {v.flag for v in judge_ops(tracer.ops, "strict", kernel_calls.count())}
    assert flags == {"dynamic:torch_compute_op"}
    assert judge_ops(tracer.ops, "partial", kernel_calls.count()) == []


def test_pure_cpp_kernel_passes_strict(probe):
    x = torch.randn(3, 5).t()  # non-contiguous: the kernel's own contiguous() copy is allowed
    kernel_calls.reset()
    with OpTracer() as tracer:
        y = probe.relu_loop(x)
    assert torch.equal(y, torch.relu(x))
    assert "aten.empty_like.default" in tracer.ops
    assert {classify_op(op) for op in tracer.ops} <= {"alloc", "copy", "view", "meta"}
    assert kernel_calls.count() == 1
    assert judge_ops(tracer.ops, "strict", kernel_calls.count()) == []


def test_ghost_kernel_is_caught(probe):
    class Ghost(torch.nn.Module):
        """Compiles a kernel, keeps it, and computes with PyTorch."""

        def __init__(self):
            super().__init__()
            self.ext = probe

        def forward(self, x):
            return torch.relu(x)

    kernel_calls.reset()
    with OpTracer() as tracer:
        Ghost()(torch.randn(10))
    flags = {v.flag for v in judge_ops(tracer.ops, "partial", kernel_calls.count())}
    assert flags == {"dynamic:kernel_not_called"}


def test_counting_wrapper_preserves_behaviour_and_is_cheap(probe):
    kernel_calls.reset()
    stored = probe.relu_loop  # a reference taken after loading is the wrapper too
    x = torch.randn(32)
    assert torch.equal(stored(x), probe.relu_loop(x))
    assert kernel_calls.count() == 2
    assert not hasattr(stored, "__wrapped__") and stored.__name__ == "relu_loop"
    with pytest.raises(TypeError):
        probe.relu_loop("not a tensor")  # pybind's own argument error comes through unchanged
    assert probe.ident(41) == 41

    inner = probe.ident.__closure__[0].cell_contents  # the pybind function the wrapper forwards to
    assert type(inner).__name__ == "builtin_function_or_method"
    n = 200_000
    t0 = time.perf_counter()
    for i in range(n):
        inner(i)
    t1 = time.perf_counter()
    for i in range(n):
        probe.ident(i)
    t2 = time.perf_counter()
    overhead_ns = ((t2 - t1) - (t1 - t0)) / n * 1e9
    print(f"\nkernel-call wrapper overhead: {overhead_ns:.0f} ns/call (raw call {(t1 - t0) / n * 1e9:.0f} ns)")
    assert overhead_ns < 2000


PROBE_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}

torch::Tensor relu_aten_cuda(torch::Tensor x) { return at::relu(x); }
"""


@pytest.mark.gpu
def test_cuda_extension_traced_and_counted(build_cache_dir):
    build = os.path.join(build_cache_dir, "op_policy_probe_cuda")
    os.makedirs(build, exist_ok=True)
    kernel_calls.install()
    try:
        ext = cpp_extension.load_inline(
            name="ka_op_policy_probe_cuda", build_directory=build, functions=["relu_cuda", "relu_aten_cuda"],
            cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);\ntorch::Tensor relu_aten_cuda(torch::Tensor x);",
            cuda_sources=PROBE_CUDA)
        x = torch.randn(1 << 20, device="cuda")
        kernel_calls.reset()
        with OpTracer() as clean:
            y = ext.relu_cuda(x)
        assert torch.equal(y, torch.relu(x)) and kernel_calls.count() == 1
        assert judge_ops(clean.ops, "strict", kernel_calls.count()) == []
        with OpTracer() as hidden:
            ext.relu_aten_cuda(x)
        assert "aten.relu.default" in hidden.ops
        assert {v.flag for v in judge_ops(hidden.ops, "strict", 1)} == {"dynamic:torch_compute_op"}
        small = torch.randn(256, device="cuda")
        inner = ext.relu_cuda.__closure__[0].cell_contents
        timings = {}
        for label, fn in (("raw", inner), ("wrapped", ext.relu_cuda), ("raw", inner), ("wrapped", ext.relu_cuda)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20_000):
                fn(small)
            torch.cuda.synchronize()
            timings[label] = (time.perf_counter() - t0) / 20_000 * 1e6
        print(f"\ncuda launch via extension: raw {timings['raw']:.2f} us, wrapped {timings['wrapped']:.2f} us per call")
        assert timings["wrapped"] < timings["raw"] + 2.0
    finally:
        uninstall()
