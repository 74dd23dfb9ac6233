"""SiLU in C++, written the slow way: a first pass stores sigmoid(x) with libm's scalar exp, a second
pass multiplies by x, so the output is written twice and nothing vectorizes."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor silu_two_pass(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "silu_two_pass expects float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = 1.0f / (1.0f + std::exp(-in[i]));
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * out[i];
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_slow_l1_03_silu",
    cpp_sources=[cpp_source],
    functions=["silu_two_pass"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.silu_two_pass(x)
