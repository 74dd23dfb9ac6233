"""Attack: a thread started inside forward on the CUDA path. The extension's host function hands the kernel
launch to a `std::thread` it joins before returning (the CPU suite's `cpp_hidden_threads.py` spreads work
that way; here it stands for any thread or process a CUDA candidate starts after `__init__`, host-side
work beside the GPU's included). No thread count between phases sees a thread started and joined inside
one call.

Defence: the run child refuses every new thread and process after `__init__` on CUDA as on CPU
(`spawn_guard.refuse_new_tasks`: RLIMIT_NPROC 0 for its slot uid, a seccomp filter on clone/fork). The CUDA
context, the driver's own threads and cuBLAS's handle are created by the run child's warm-up before the
baseline thread count, and the candidate's import and `__init__` (its `load_inline`, its first `.to("cuda")`)
run before the refusal, so an honest kernel is unaffected (tests/test_adversarial_cuda.py runs
`tests/fixtures/core/cuda_relu.py` beside this file).
Expected: rejected, static:threads_or_processes; static off: runtime_error ("Resource temporarily
unavailable": `std::thread` cannot start), score 0.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAException.h>
#include <thread>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int device = xc.get_device();
    std::thread launcher([=] {
        cudaSetDevice(device);
        relu_kernel<<<blocks, threads>>>(in, out, n);
    });
    launcher.join();
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = "torch::Tensor relu_fwd(torch::Tensor x);"

ext = load_inline(name="adv_cuda_thread_forward", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["relu_fwd"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_fwd(x)
