"""Mean over one dimension in C++. For the last dimension each row is summed with a SIMD reduction;
otherwise the tensor is viewed as (outer, reduced, inner) and the contiguous inner axis is vectorized."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor mean_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "mean_dim_forward expects float32");
    auto xc = x.contiguous();
    const int64_t nd = xc.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
    const int64_t reduced = xc.size(dim);
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < nd; ++d) if (d != dim) shape.push_back(xc.size(d));
    auto y = torch::empty(shape, xc.options());
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const float inv = 1.0f / static_cast<float>(reduced);
    if (inner == 1) {
        #pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < outer; ++o) {
            const float* row = in + o * reduced;
            float s = 0.0f;
            #pragma omp simd reduction(+:s)
            for (int64_t r = 0; r < reduced; ++r) s += row[r];
            out[o] = s * inv;
        }
        return y;
    }
    #pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
        float* acc = out + o * inner;
        const float* base = in + o * reduced * inner;
        #pragma omp simd
        for (int64_t j = 0; j < inner; ++j) acc[j] = 0.0f;
        for (int64_t r = 0; r < reduced; ++r) {
            const float* row = base + r * inner;
            #pragma omp simd
            for (int64_t j = 0; j < inner; ++j) acc[j] += row[j];
        }
        #pragma omp simd
        for (int64_t j = 0; j < inner; ++j) acc[j] *= inv;
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_11_mean_dim",
    cpp_sources=[cpp_source],
    functions=["mean_dim_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.mean_dim_forward(x, self.dim)
