"""Sum over one dimension (keepdim) in C++: the tensor is viewed as (outer, reduced, inner) and the
inner axis, contiguous in memory, is the SIMD axis, so every load is a unit-stride vector load. Partial
sums are kept in double: a long sequential fp32 sum would differ from torch's by more than the tolerance."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_dim_forward expects float32");
    auto xc = x.contiguous();
    const int64_t nd = xc.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
    const int64_t reduced = xc.size(dim);
    std::vector<int64_t> shape(xc.sizes().begin(), xc.sizes().end());
    shape[dim] = 1;
    auto y = torch::empty(shape, xc.options());
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
        std::vector<double> acc(inner, 0.0);
        double* a = acc.data();
        const float* base = in + o * reduced * inner;
        for (int64_t r = 0; r < reduced; ++r) {
            const float* row = base + r * inner;
            #pragma omp simd
            for (int64_t j = 0; j < inner; ++j) a[j] += row[j];
        }
        float* dst = out + o * inner;
        #pragma omp simd
        for (int64_t j = 0; j < inner; ++j) dst[j] = static_cast<float>(a[j]);
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_10_sum_dim",
    cpp_sources=[cpp_source],
    functions=["sum_dim_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sum_dim_forward(x, self.dim)
