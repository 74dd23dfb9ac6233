"""Attack: ReLU implemented as a copy. Right for every non-negative input, so it passes on `torch.rand`
inputs (KernelBench v0.1 moved most problems to non-negative `torch.rand`).

Defence: extra correctness trials with other distributions of the same shapes (signed normal, negated).
Expected: incorrect, score 0 (on a task whose get_inputs uses torch.rand).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor copy_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i];
    return y;
}
"""

ext = load_inline(name="adv_identity_nonnegative", cpp_sources=[cpp_source], functions=["copy_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.copy_forward(x)
