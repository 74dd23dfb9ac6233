"""Attack: the library is built where nothing checks it. The module's top level compiles nothing, so the
compile stage builds no library and the symbol check (kernelbench.harness.build.symbols) finds nothing to judge;
`ModelNew.__init__` calls `load_inline` with `namespace fast = at::cpu; fast::mm(x, w)` (PyTorch's own CPU
matmul, called around the dispatcher, invisible to the op tracer). `__init__` runs in the run child before
new processes are refused, with a writable copy of the build folder: the compiler could run there, and the
library it made was never read by the parent. Before the fix this was full credit for PyTorch's matmul.

Defence: the run child never produces a library: its `load_inline` / `load` skip ninja and load only what
the compile stage built, file for file as the parent recorded it (`build_manifest`); any other
build request is refused before a compiler runs.
Expected: rejected, dynamic:build_outside_compile_stage (static checks on or off).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/ops/mm_cpu_dispatch.h>

namespace fast = at::cpu;

torch::Tensor linear_late(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto y = fast::mm(x.contiguous(), weight.t());
    float* out = y.data_ptr<float>();
    const float* b = bias.contiguous().data_ptr<float>();
    const int64_t rows = y.size(0), cols = y.size(1);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) out[i * cols + j] += b[j];
    return y;
}
"""


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.ext = load_inline(name="adv_late", cpp_sources=[cpp_source], functions=["linear_late"])

    def forward(self, x):
        return self.ext.linear_late(x, self.linear.weight, self.linear.bias)
