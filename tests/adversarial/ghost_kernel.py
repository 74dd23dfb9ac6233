"""Attack: a ghost kernel. A correct C++ ReLU is compiled but never called; PyTorch does the work.

Defence: no static rule can tell (the kernel exists); the run child counts calls into the extension
(`dynamic:kernel_not_called`) and the op tracer sees `aten.relu` (`dynamic:torch_compute_op`, strict policy).
Expected: rejected with both flags (strict); under the partial policy still rejected,
dynamic:kernel_not_called.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor ghost_relu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    return y;
}
"""

ghost_ext = load_inline(name="adv_ghost_kernel", cpp_sources=[cpp_source], functions=["ghost_relu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = ghost_ext.ghost_relu  # kept, never used

    def forward(self, x):
        return torch.relu(x)
