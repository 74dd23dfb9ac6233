"""Attack: embed the reference. The task's torch code is pasted under another name (no `Model` anywhere, so
no name rule applies) and a decoy kernel is called on the side so a kernel does run.

Defence: the op tracer under the strict policy: `aten.relu` runs inside forward.
Expected: rejected, dynamic:torch_compute_op (static checks pass: this is the dynamic check's job).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor decoy_touch(torch::Tensor x) {
    auto options = x.options();
    auto y = torch::empty({1}, options);
    y.data_ptr<float>()[0] = 0.0f;
    return y;
}
"""

decoy_ext = load_inline(name="adv_copies_reference", cpp_sources=[cpp_source], functions=["decoy_touch"])


class PastedReference(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = PastedReference()

    def forward(self, x):
        decoy_ext.decoy_touch(x)
        return self.body(x)
