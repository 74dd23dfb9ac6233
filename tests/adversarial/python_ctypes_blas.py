"""Attack: MKL called from Python through ctypes. `forward` runs a custom kernel that fills the output with
the bias, then hands the matmul to `sgemm_` of the already loaded libtorch_cpu through a ctypes function
pointer: no ATen op is dispatched (the op tracer sees only allocation) and the built library imports nothing
banned.

Defence: `static:forbidden_import` (ctypes); with static checks off, which code ran
(kernelbench.harness.code_check): most of the calls' sampled time is in libtorch_cpu, not in the build.
Expected: rejected, static:forbidden_import; static checks off: rejected, dynamic:library_compute.
"""
import ctypes
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor bias_rows(torch::Tensor bias, int64_t rows) {
    auto b = bias.contiguous();
    const int64_t n = b.size(0);
    auto y = torch::empty({rows, n}, b.options());
    float* out = y.data_ptr<float>();
    const float* src = b.data_ptr<float>();
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j) out[i * n + j] = src[j];
    return y;
}
"""

ext = load_inline(name="adv_ctypes_blas", cpp_sources=[cpp_source], functions=["bias_rows"])
mkl = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
gemm = mkl.sgemm_
ONE = ctypes.c_float(1.0)


def ref(v):
    return ctypes.byref(ctypes.c_int(v))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        m, k, n = x.shape[0], x.shape[1], w.shape[0]
        y = ext.bias_rows(self.linear.bias, m)
        gemm(b"T", b"N", ref(n), ref(m), ref(k), ctypes.byref(ONE), ctypes.c_void_p(w.data_ptr()), ref(k),
             ctypes.c_void_p(x.data_ptr()), ref(k), ctypes.byref(ONE), ctypes.c_void_p(y.data_ptr()), ref(n))
        return y
