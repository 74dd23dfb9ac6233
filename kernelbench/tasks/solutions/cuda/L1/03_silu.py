"""SiLU x * sigmoid(x) as one CUDA kernel with float4 accesses."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor silu_forward(torch::Tensor x);
"""

cuda_source = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>
#include <vector>

// The elementwise function; p0 and p1 carry the module's constants (unused ones are 0).
__device__ __forceinline__ float op(float v, float p0, float p1) {
    return v / (1.0f + expf(-v));
}

// Grid-stride loop over float4 groups, then a scalar tail; `vec` is false when a pointer is not
// 16-byte aligned, in which case every element goes through the scalar path.
__global__ void map_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, bool vec,
                           float p0, float p1) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t n4 = vec ? n / 4 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int64_t i = first; i < n4; i += stride) {
        float4 v = x4[i];
        v.x = op(v.x, p0, p1);
        v.y = op(v.y, p0, p1);
        v.z = op(v.z, p0, p1);
        v.w = op(v.w, p0, p1);
        y4[i] = v;
    }
    for (int64_t i = n4 * 4 + first; i < n; i += stride) y[i] = op(x[i], p0, p1);
}

torch::Tensor silu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "silu_forward expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
    const int threads = 256;
    const int64_t groups = vec ? (n + 3) / 4 : n;
    const int blocks = (int)std::min<int64_t>((groups + threads - 1) / threads, 65535);
    map_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(xp, yp, n, vec, 0.0f, 0.0f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(
    name="sol_cuda_l1_03_silu",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["silu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.silu_forward(x)
