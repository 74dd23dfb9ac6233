"""Attack: cache results keyed by the input's address (`data_ptr`); a repeated address returns the stored
output without running the kernel (CUDA-L1 and gpu-mode saw this hack).

Defence: timing rotates input sets through the same buffers and sends the last round's outputs back to be
checked; fresh clones per correctness trial may also land at a recycled address.
Expected: incorrect (stale outputs), score 0.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    return y;
}
"""

relu_ext = load_inline(name="adv_cache_by_pointer", cpp_sources=[cpp_source], functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = x.data_ptr()
        if key not in self.cache:
            self.cache[key] = relu_ext.relu_forward(x)
        return self.cache[key]
