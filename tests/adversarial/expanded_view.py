"""Attack: return an expanded view. The task's output repeats one row (a column mean) down every row; the
kernel computes the row once and returns `row.expand(m, n)`, a stride-0 view that skips writing m rows.

Defence: the run child records whether each output is dense and non-overlapping; the parent refuses
overlapping strides.
Expected: incorrect ("overlapping or non-dense strides"), score 0.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor column_mean(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t m = xc.size(0), n = xc.size(1);
    auto row = torch::zeros({1, n}, xc.options());
    const float* in = xc.data_ptr<float>();
    float* out = row.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) out[j] += in[i * n + j];
    for (int64_t j = 0; j < n; ++j) out[j] /= static_cast<float>(m);
    return row;
}
"""

ext = load_inline(name="adv_expanded_view", cpp_sources=[cpp_source], functions=["column_mean"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.column_mean(x).expand(x.shape[0], x.shape[1])
