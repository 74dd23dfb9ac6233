"""Row L2 normalisation in C++: sum of squares, then one scaling pass by 1 / max(norm, eps), matching
F.normalize; the reference materialises the norm, its clamp and its broadcast as separate ops."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor l2_normalize_rows(torch::Tensor x, double eps) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2, "l2_normalize_rows expects a 2-D float32 tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = in + r * cols;
        float* yr = out + r * cols;
        float q = 0.0f;
        #pragma omp simd reduction(+:q)
        for (int64_t c = 0; c < cols; ++c) q += xr[c] * xr[c];
        float norm = std::sqrt(q);
        norm = norm > static_cast<float>(eps) ? norm : static_cast<float>(eps);
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] / norm;
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_18_l2_normalize",
    cpp_sources=[cpp_source],
    functions=["l2_normalize_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.l2_normalize_rows(x, 1e-12)
