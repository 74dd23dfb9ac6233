"""Attack: hang. The C++ kernel spins forever.

Defence: the run stage's wall-clock timeout; the whole process group and pid namespace are killed.
Expected: timeout, score 0 (static checks pass: nothing in the text is forbidden).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor spin_forever(torch::Tensor x) {
    volatile int64_t spins = 0;
    while (spins >= 0) spins = spins + 1 > 1000 ? 1 : spins + 1;
    return x;
}
"""

ext = load_inline(name="adv_cpp_hang", cpp_sources=[cpp_source], functions=["spin_forever"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.spin_forever(x)
