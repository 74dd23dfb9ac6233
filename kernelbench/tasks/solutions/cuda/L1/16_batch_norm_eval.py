"""Inference batch norm in CUDA: per-channel scale and shift folded once, then one multiply-add pass."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor batch_norm_eval(torch::Tensor x, torch::Tensor mean, torch::Tensor var,
                              torch::Tensor weight, torch::Tensor bias, double eps);
"""

cuda_source = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>
#include <vector>

// Per element: channel c = (i / plane) % C, y = x * scale[c] + shift[c] with the statistics folded into
// scale and shift by a tiny per-channel kernel first.
__global__ void fold_kernel(const float* __restrict__ mean, const float* __restrict__ var, const float* __restrict__ w,
                            const float* __restrict__ b, float* __restrict__ scale, float* __restrict__ shift,
                            int64_t channels, float eps) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < channels) {
        const float s = w[c] / sqrtf(var[c] + eps);
        scale[c] = s;
        shift[c] = b[c] - mean[c] * s;
    }
}

__global__ void batch_norm_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                  const float* __restrict__ shift, float* __restrict__ y,
                                  int64_t n, int64_t plane, int64_t channels) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int64_t c = (i / plane) % channels;
        y[i] = x[i] * scale[c] + shift[c];
    }
}

torch::Tensor batch_norm_eval(torch::Tensor x, torch::Tensor mean, torch::Tensor var,
                              torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() >= 2, "batch_norm_eval expects float32 CUDA (N, C, ...)");
    auto xc = x.contiguous();
    const int64_t channels = xc.size(1);
    const int64_t n = xc.numel();
    auto y = torch::empty_like(xc);
    if (n == 0) return y;
    const int64_t plane = n / (xc.size(0) * channels);
    auto folded = torch::empty({2, channels}, xc.options());
    auto mc = mean.contiguous(), vc = var.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
    auto stream = c10::cuda::getCurrentCUDAStream();
    fold_kernel<<<(unsigned)((channels + 255) / 256), 256, 0, stream>>>(
        mc.data_ptr<float>(), vc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
        folded.data_ptr<float>(), folded.data_ptr<float>() + channels, channels, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
    batch_norm_kernel<<<blocks, 256, 0, stream>>>(xc.data_ptr<float>(), folded.data_ptr<float>(),
        folded.data_ptr<float>() + channels, y.data_ptr<float>(), n, plane, channels);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(
    name="sol_cuda_l1_16_batch_norm_eval",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["batch_norm_eval"],
    extra_cuda_cflags=["-O3"],
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
