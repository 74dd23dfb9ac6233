"""softmax(a @ b, dim=-1) in C++, written the slow way: a naive i-j-k product that walks b down its
columns (a cache miss per step), then a softmax that calls libm's exp twice per element."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor matmul_softmax_naive(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "expects float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "expects (M, K) @ (K, N)");
    auto ac = a.contiguous(), bc = b.contiguous();
    const int64_t M = ac.size(0), K = ac.size(1), N = bc.size(1);
    auto y = torch::empty({M, N}, ac.options());
    const float* ap = ac.data_ptr<float>();
    const float* bp = bc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            double s = 0.0;  // double, as the fast kernel: the tolerance has no room for fp32 drift
            for (int64_t k = 0; k < K; ++k) s += static_cast<double>(ap[i * K + k]) * bp[k * N + j];
            yp[i * N + j] = static_cast<float>(s);
        }
    for (int64_t i = 0; i < M; ++i) {
        float* row = yp + i * N;
        float m = row[0];
        for (int64_t j = 1; j < N; ++j) m = std::fmax(m, row[j]);
        float s = 0.0f;
        for (int64_t j = 0; j < N; ++j) s += std::exp(row[j] - m);
        for (int64_t j = 0; j < N; ++j) row[j] = std::exp(row[j] - m) / s;
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_slow_l2_07_matmul_softmax",
    cpp_sources=[cpp_source],
    functions=["matmul_softmax_naive"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.matmul_softmax_naive(a, b)
