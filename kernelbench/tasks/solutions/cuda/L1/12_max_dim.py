"""Maximum over one dimension in CUDA, NaN-propagating as torch.max: a warp-shuffle block reduction
per row when the last dimension is reduced, coalesced column walks otherwise."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor max_dim_forward(torch::Tensor x, int64_t dim);
"""

cuda_source = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>
#include <vector>

// View x as (outer, reduced, inner); inner == 1 takes the one-block-per-row path.
static void split_dims(const torch::Tensor& x, int64_t& dim, int64_t& outer, int64_t& reduced, int64_t& inner) {
    const int64_t nd = x.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    TORCH_CHECK(x.size(dim) > 0, "reduction over an empty dimension");
    outer = 1;
    inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= x.size(d);
    reduced = x.size(dim);
}

// NaN-propagating maximum, as torch.max: a NaN wins every comparison.
__device__ __forceinline__ float nan_max(float a, float b) { return (b > a || b != b) ? b : a; }

__global__ void max_rows(const float* __restrict__ x, float* __restrict__ y, int64_t reduced) {
    __shared__ float scratch[32];
    const float* xr = x + (int64_t)blockIdx.x * reduced;
    float acc = -INFINITY;
    for (int64_t r = threadIdx.x; r < reduced; r += blockDim.x) acc = nan_max(acc, xr[r]);
    for (int offset = 16; offset > 0; offset >>= 1) acc = nan_max(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x >> 5) ? scratch[lane] : -INFINITY;
        for (int offset = 16; offset > 0; offset >>= 1) acc = nan_max(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
        if (lane == 0) y[blockIdx.x] = acc;
    }
}

__global__ void max_cols(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t reduced, int64_t inner) {
    const int64_t total = outer * inner, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const int64_t o = idx / inner, j = idx % inner;
        const float* p = x + o * reduced * inner + j;
        float acc = p[0];
        for (int64_t r = 1; r < reduced; ++r) acc = nan_max(acc, p[r * inner]);
        y[idx] = acc;
    }
}

torch::Tensor max_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "max_dim_forward expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    int64_t outer, reduced, inner;
    split_dims(xc, dim, outer, reduced, inner);
    std::vector<int64_t> shape(xc.sizes().begin(), xc.sizes().end());
    shape.erase(shape.begin() + dim);
    auto y = torch::empty(shape, xc.options());
    if (outer * inner == 0) return y;
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (inner == 1) {
        TORCH_CHECK(outer <= 2147483647LL, "too many rows");
        max_rows<<<(unsigned)outer, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), reduced);
    } else {
        const int blocks = (int)std::min<int64_t>((outer * inner + 255) / 256, 65535);
        max_cols<<<blocks, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), outer, reduced, inner);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(
    name="sol_cuda_l1_12_max_dim",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["max_dim_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.max_dim_forward(x, self.dim)
