"""LayerNorm over the last dimension in C++: per row, mean then variance (two passes over a row that
stays in cache, which is more accurate than E[x^2] - E[x]^2), then one fused normalize-scale-shift pass."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "layer_norm_rows expects float32");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int64_t cols = xc.size(-1);
    TORCH_CHECK(wc.numel() == cols && bc.numel() == cols, "weight/bias must match the last dimension");
    const int64_t rows = xc.numel() / cols;
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    const float* w = wc.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const float inv_n = 1.0f / static_cast<float>(cols);
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = in + r * cols;
        float* yr = out + r * cols;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
        const float mean = s * inv_n;
        float q = 0.0f;
        #pragma omp simd reduction(+:q)
        for (int64_t c = 0; c < cols; ++c) {
            const float d = xr[c] - mean;
            q += d * d;
        }
        const float rstd = 1.0f / std::sqrt(q * inv_n + static_cast<float>(eps));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_14_layer_norm",
    cpp_sources=[cpp_source],
    functions=["layer_norm_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        # Same module and the same draws, in the same order, as the task: the parameters match.
        self.ln = nn.LayerNorm(features)
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.1 * torch.randn(features))
            self.ln.bias.copy_(0.1 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.layer_norm_rows(x, self.ln.weight, self.ln.bias, self.ln.eps)
