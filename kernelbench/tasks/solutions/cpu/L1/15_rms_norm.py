"""RMSNorm in C++: one pass for the mean square of a row, one fused pass that scales by 1/rms and the
weight. The reference runs five separate tensor ops with four temporaries; this reads x twice, writes once."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor rms_norm_rows(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "rms_norm_rows expects float32");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    const int64_t cols = xc.size(-1);
    TORCH_CHECK(wc.numel() == cols, "weight must match the last dimension");
    const int64_t rows = xc.numel() / cols;
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    const float* w = wc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = in + r * cols;
        float* yr = out + r * cols;
        float q = 0.0f;
        #pragma omp simd reduction(+:q)
        for (int64_t c = 0; c < cols; ++c) q += xr[c] * xr[c];
        const float rms = std::sqrt(q / static_cast<float>(cols) + static_cast<float>(eps));
        const float inv = 1.0f / rms;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_15_rms_norm",
    cpp_sources=[cpp_source],
    functions=["rms_norm_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rms_norm_rows(x, self.weight, self.eps)
