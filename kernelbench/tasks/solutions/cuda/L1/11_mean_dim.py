"""Mean over one dimension in CUDA: coalesced column walks, or a block reduction per row."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor mean_dim_forward(torch::Tensor x, int64_t dim);
"""

cuda_source = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>
#include <vector>

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum over the whole block, returned to every thread. blockDim.x is a multiple of 32; `scratch` holds
// 32 floats of shared memory. The first barrier lets consecutive calls reuse the same scratch.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

// View x as (outer, reduced, inner). inner == 1 (reducing the last dimension): one block per output,
// a block reduction over a contiguous row. Otherwise one thread per output, walking the reduced axis
// with neighbouring threads on neighbouring inner indices (coalesced).
static void split_dims(const torch::Tensor& x, int64_t& dim, int64_t& outer, int64_t& reduced, int64_t& inner) {
    const int64_t nd = x.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    outer = 1;
    inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= x.size(d);
    reduced = x.size(dim);
}

__global__ void mean_rows(const float* __restrict__ x, float* __restrict__ y, int64_t reduced) {
    __shared__ float scratch[32];
    const float* xr = x + (int64_t)blockIdx.x * reduced;
    double part = 0.0;  // per-thread partial in double: long sequential fp32 sums drift past the tolerance
    for (int64_t r = threadIdx.x; r < reduced; r += blockDim.x) { const double v = xr[r]; part += v; }
    const float acc = block_sum((float)part, scratch);
    if (threadIdx.x == 0) y[blockIdx.x] = acc / (float)reduced;
}

__global__ void mean_cols(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t reduced, int64_t inner) {
    const int64_t total = outer * inner, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const int64_t o = idx / inner, j = idx % inner;
        const float* p = x + o * reduced * inner + j;
        double acc = 0.0;
        for (int64_t r = 0; r < reduced; ++r) acc += p[r * inner];
        y[idx] = (float)(acc / (double)reduced);
    }
}

torch::Tensor mean_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "mean_dim_forward expects a float32 CUDA tensor");
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
        mean_rows<<<(unsigned)outer, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), reduced);
    } else {
        const int blocks = (int)std::min<int64_t>((outer * inner + 255) / 256, 65535);
        mean_cols<<<blocks, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), outer, reduced, inner);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(
    name="sol_cuda_l1_11_mean_dim",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["mean_dim_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.mean_dim_forward(x, self.dim)
