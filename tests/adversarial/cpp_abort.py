"""Attack: `std::abort()` from C++ inside forward (SIGABRT, no result written).

Defence: the run child's death by signal becomes a status (the runtime path; nothing static applies).
Expected: runtime_error (feedback names SIGABRT), score 0.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstdlib>

torch::Tensor give_up(torch::Tensor x) {
    if (x.numel() >= 0) std::abort();
    return x;
}
"""

ext = load_inline(name="adv_cpp_abort", cpp_sources=[cpp_source], functions=["give_up"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.give_up(x)
