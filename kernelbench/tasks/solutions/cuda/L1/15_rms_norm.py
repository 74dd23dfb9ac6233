"""RMSNorm in CUDA: one block per row, one reduction and one fused scaling pass."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor rms_norm_rows(torch::Tensor x, torch::Tensor weight, double eps);
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

// One block per row: the mean square by a block reduction, then one scaling pass. The reference runs
// five kernels (x*x, mean, +eps and sqrt, divide, multiply) with full-size temporaries.
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ y, int64_t cols, float eps) {
    __shared__ float scratch[32];
    const float* xr = x + (int64_t)blockIdx.x * cols;
    float* yr = y + (int64_t)blockIdx.x * cols;
    float q = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) q += xr[c] * xr[c];
    const float rms = sqrtf(block_sum(q, scratch) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] / rms * w[c];
}

torch::Tensor rms_norm_rows(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "rms_norm_rows expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    const int64_t cols = xc.size(-1);
    TORCH_CHECK(wc.numel() == cols, "weight must match the last dimension");
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.numel() / cols;
    TORCH_CHECK(rows <= 2147483647LL, "too many rows");
    if (rows == 0 || cols == 0) return y;
    const int threads = cols >= 4096 ? 1024 : 256;
    rms_norm_kernel<<<(unsigned)rows, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(
    name="sol_cuda_l1_15_rms_norm",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["rms_norm_rows"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rms_norm_rows(x, self.weight, self.eps)
