"""Attack: unbounded memory. The C++ kernel allocates and touches 64 MiB blocks forever, keeping them all.

Defence: the run child's address-space limit (RLIMIT_AS, `memory_limit_mb`): allocation fails inside the
child (std::bad_alloc becomes MemoryError) long before the host runs short.
Expected: runtime_error ("out of memory"), score 0 (static checks pass: allocation is not forbidden).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstring>
#include <memory>
#include <vector>

static std::vector<std::unique_ptr<char[]>> hoard;

torch::Tensor hog_memory(torch::Tensor x) {
    const size_t block = size_t(64) << 20;
    for (;;) {
        hoard.emplace_back(new char[block]);
        std::memset(hoard.back().get(), 1, block);
    }
    return x;
}
"""

ext = load_inline(name="adv_cpp_memory_hog", cpp_sources=[cpp_source], functions=["hog_memory"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.hog_memory(x)
