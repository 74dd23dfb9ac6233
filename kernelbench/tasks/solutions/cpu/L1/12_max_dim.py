"""Maximum over one dimension in C++, viewed as (outer, reduced, inner) with the contiguous inner axis
vectorized; NaN propagates as in torch.max."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor max_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "max_dim_forward expects float32");
    auto xc = x.contiguous();
    const int64_t nd = xc.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    TORCH_CHECK(xc.size(dim) > 0, "max over an empty dimension");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
    const int64_t reduced = xc.size(dim);
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < nd; ++d) if (d != dim) shape.push_back(xc.size(d));
    auto y = torch::empty(shape, xc.options());
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
        float* best = out + o * inner;
        const float* base = in + o * reduced * inner;
        #pragma omp simd
        for (int64_t j = 0; j < inner; ++j) best[j] = base[j];
        for (int64_t r = 1; r < reduced; ++r) {
            const float* row = base + r * inner;
            #pragma omp simd
            for (int64_t j = 0; j < inner; ++j) {
                const float v = row[j];
                // v != v picks up a NaN; once best is NaN, no comparison replaces it
                best[j] = (v > best[j] || v != v) ? v : best[j];
            }
        }
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_12_max_dim",
    cpp_sources=[cpp_source],
    functions=["max_dim_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.max_dim_forward(x, self.dim)
