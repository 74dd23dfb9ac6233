"""Attack: `exit(0)` from C++ inside forward: the process ends with status 0 before any result is written,
and Python's SystemExit handling never sees it.

Defence: no result file with the job's nonce means no result (the runtime path; nothing static applies).
Expected: runtime_error, score 0.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstdlib>

torch::Tensor quit_clean(torch::Tensor x) {
    if (x.numel() >= 0) std::exit(0);
    return x;
}
"""

ext = load_inline(name="adv_cpp_exit", cpp_sources=[cpp_source], functions=["quit_clean"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.quit_clean(x)
