"""Attack: mutate the inputs. The kernel computes ReLU correctly, then zeroes its input in place (on a GPU
with the reference run afterwards, the reference would see zeros; Kevin-32B, KernelBench PR #82).

Defence: every trial gets fresh clones, and the parent checks the inputs are bit-identical afterwards.
Expected: incorrect ("modified in place"), score 0.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_then_zero(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "contiguous input expected");
    auto y = torch::empty_like(x);
    float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    for (int64_t i = 0; i < x.numel(); ++i) in[i] = 0.0f;
    return y;
}
"""

ext = load_inline(name="adv_zero_inputs", cpp_sources=[cpp_source], functions=["relu_then_zero"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_then_zero(x)
