"""Inference batch norm in C++: per channel the statistics fold into one scale and one shift, then a
single multiply-add pass over each (n, c) plane."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
#include <vector>

torch::Tensor batch_norm_eval(torch::Tensor x, torch::Tensor mean, torch::Tensor var,
                              torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() >= 2, "batch_norm_eval expects float32 (N, C, ...)");
    auto xc = x.contiguous();
    const int64_t n = xc.size(0), ch = xc.size(1);
    const int64_t plane = xc.numel() / (n * ch);
    auto mc = mean.contiguous(); auto vc = var.contiguous();
    auto wc = weight.contiguous(); auto bc = bias.contiguous();
    std::vector<float> scale(ch), shift(ch);
    for (int64_t c = 0; c < ch; ++c) {
        // (x - mean) * w / sqrt(var + eps) + b  ==  x * scale + shift, folded once per channel
        const float inv = 1.0f / std::sqrt(vc.data_ptr<float>()[c] + static_cast<float>(eps));
        scale[c] = inv * wc.data_ptr<float>()[c];
        shift[c] = bc.data_ptr<float>()[c] - mc.data_ptr<float>()[c] * scale[c];
    }
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b) {
        for (int64_t c = 0; c < ch; ++c) {
            const float a = scale[c], s = shift[c];
            const float* xp = in + (b * ch + c) * plane;
            float* yp = out + (b * ch + c) * plane;
            #pragma omp simd
            for (int64_t i = 0; i < plane; ++i) yp[i] = xp[i] * a + s;
        }
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_16_batch_norm_eval",
    cpp_sources=[cpp_source],
    functions=["batch_norm_eval"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(num_features))
        self.bias = nn.Parameter(0.1 * torch.randn(num_features))
        self.register_buffer("running_mean", 0.1 * torch.randn(num_features))
        self.register_buffer("running_var", 0.5 + torch.rand(num_features))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.batch_norm_eval(x, self.running_mean, self.running_var, self.weight, self.bias, self.eps)
