"""Attack: PyTorch's own kernel by another spelling. `namespace fast = at::cpu; fast::mm(x, w)` calls ATen's
CPU matmul entry point directly, around the dispatcher: the op tracer (a dispatch mode) never sees it, and no
static pattern matches the alias (`at::cpu::` is never written). The bias is added by a plain loop, so a
custom kernel runs too. Before the build was judged this was full credit for PyTorch's matmul under the
strict policy.

Defence: the built library's imports (kernelbench.harness.build.symbols): it imports
`at::cpu::mm(at::Tensor const&, at::Tensor const&)`, an ATen operator's backend entry point, whatever the
source called it.
Expected: rejected, build:dispatch_bypass (compiled, never run).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/ops/mm_cpu_dispatch.h>

namespace fast = at::cpu;

torch::Tensor linear_fast(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto y = fast::mm(x.contiguous(), weight.t());
    float* out = y.data_ptr<float>();
    const float* b = bias.contiguous().data_ptr<float>();
    const int64_t rows = y.size(0), cols = y.size(1);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) out[i * cols + j] += b[j];
    return y;
}
"""

ext = load_inline(name="adv_alias", cpp_sources=[cpp_source], functions=["linear_fast"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_fast(x, self.linear.weight, self.linear.bias)
