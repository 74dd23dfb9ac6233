"""relu(x @ W^T + b) in C++, written the slow way: one scalar dot product per output (no register
blocking, no SIMD), then separate passes for the bias and the ReLU."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor linear_bias_relu_naive(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "expects float32");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "expects x (B, in) and W (out, in)");
    auto xc = x.contiguous(), wc = w.contiguous(), bc = bias.contiguous();
    const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    const float* bp = bc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            double s = 0.0;  // double, as the fast kernel: the tolerance has no room for fp32 drift
            for (int64_t k = 0; k < K; ++k) s += static_cast<double>(xp[i * K + k]) * wp[j * K + k];
            yp[i * N + j] = static_cast<float>(s);
        }
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) yp[i * N + j] += bp[j];
    for (int64_t i = 0; i < M * N; ++i) yp[i] = yp[i] < 0.0f ? 0.0f : yp[i];
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_slow_l2_01_linear_bias_relu",
    cpp_sources=[cpp_source],
    functions=["linear_bias_relu_naive"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.linear_bias_relu_naive(x, self.linear.weight, self.bias)
