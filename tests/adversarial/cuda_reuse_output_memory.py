"""Attack (CUDA): reuse the reference's freed output memory. forward allocates its output with
`torch.empty_like` and launches a kernel that writes nothing, hoping the caching allocator hands back the
block where the reference's (or an earlier call's) correct output still lies (Sakana AI CUDA Engineer;
KernelBench PR #25).

Defence: the reference runs in another process, so its memory never reaches the candidate; the timing
rounds' outputs are checked too, so stale blocks from the candidate's own earlier calls do not pass.
Expected: incorrect, score 0 (static checks pass).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "void touch(torch::Tensor y);"

cuda_source = r"""
#include <torch/extension.h>

__global__ void write_nothing(float* out, int64_t n) {
    if (n < 0) out[0] = 0.0f;
}

void touch(torch::Tensor y) {
    write_nothing<<<1, 32>>>(y.data_ptr<float>(), y.numel());
}
"""

ext = load_inline(name="adv_cuda_reuse_output_memory", cpp_sources=[cpp_source], cuda_sources=[cuda_source],
                  functions=["touch"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        ext.touch(out)
        return out
