"""Attack: return the input tensor itself (through the kernel, so a kernel does run and no PyTorch op is
traced). For ReLU on `torch.rand` inputs the input already is the answer, and returning it costs nothing.

Defence: extra correctness trials on signed inputs (signed normal, negated).
Expected: incorrect, score 0 (on a task whose get_inputs uses torch.rand).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor alias_input(torch::Tensor x) {
    TORCH_CHECK(x.dim() > 0, "tensor input expected");
    return x;
}
"""

ext = load_inline(name="adv_return_input", cpp_sources=[cpp_source], functions=["alias_input"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.alias_input(x)
