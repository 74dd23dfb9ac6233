"""Attack: crash. The C++ kernel writes through a null pointer.

Defence: the fault stays in the run child; the parent reports the signal.
Expected: runtime_error (feedback names SIGSEGV), score 0.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor null_write(torch::Tensor x) {
    float* volatile target = nullptr;
    *target = x.numel();
    return x;
}
"""

ext = load_inline(name="adv_cpp_segfault", cpp_sources=[cpp_source], functions=["null_write"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.null_write(x)
