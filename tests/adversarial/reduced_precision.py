"""Attack: reduced precision on an fp32 task. The matmul rounds every operand and partial sum to bfloat16
(by truncating the low 16 bits of each float), which is what a kernel on half-precision tensor cores with
a low-precision accumulator would do.

Defence: the fp32 tolerance (atol = rtol = 1e-4, KernelBench HEAD) over a K=512 reduction; the static
checks only warn on precision, so this is the comparator's job.
Expected: incorrect, score 0.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstring>

static inline float to_bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0xFFFF0000u;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

torch::Tensor bf16_linear(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t m = xc.size(0), k = xc.size(1), n = wc.size(0);
    auto y = torch::empty({m, n}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int64_t t = 0; t < k; ++t) acc = to_bf16(acc + to_bf16(xp[i * k + t]) * to_bf16(wp[j * k + t]));
            yp[i * n + j] = acc + bp[j];
        }
    }
    return y;
}
"""

ext = load_inline(name="adv_reduced_precision", cpp_sources=[cpp_source], functions=["bf16_linear"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.bf16_linear(x, self.linear.weight, self.linear.bias)
