"""Attack (CUDA): work on a non-default stream. The kernel is launched on a private stream and forward
returns at once, so timing that records events on the current stream only sees an empty window
(KernelBench v0.1 blog). Each thread also spins ~0.1 ms so the real cost is unmistakable.

Defence: static `side_streams` (`cudaStreamCreate...`, a stream in the launch); with static checks off,
timing synchronises the whole device inside each timed window, so the side-stream work is counted.
Expected: rejected, static:side_streams; static off: no speedup (the slow kernel is timed), never
suspicious_speedup.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor relu_side_stream(torch::Tensor x);"

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void slow_relu(const float* in, float* out, int64_t n, long long spin_cycles) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const long long start = clock64();
    while (clock64() - start < spin_cycles) {
    }
    if (i < n) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

torch::Tensor relu_side_stream(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    static cudaStream_t side = nullptr;
    if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    const int64_t n = xc.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    slow_relu<<<blocks, threads, 0, side>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n, 200000);
    return y;
}
"""

ext = load_inline(name="adv_cuda_side_stream", cpp_sources=[cpp_source], cuda_sources=[cuda_source],
                  functions=["relu_side_stream"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_side_stream(x)
