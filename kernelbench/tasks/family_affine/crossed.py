"""Crossed walk: reads the input row by row through its strides into a column-major output, so the writes jump
a whole row apart whatever the input's layout, and the reads too when the input is column-major."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor affine_crossed(torch::Tensor x, double a, double b) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2, "affine_crossed expects a 2-D float32 tensor");
    const int64_t rows = x.size(0), cols = x.size(1);
    const int64_t s0 = x.stride(0), s1 = x.stride(1);
    auto y = torch::empty_strided({rows, cols}, {1, rows}, x.options());
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const float fa = (float)a, fb = (float)b;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            out[c * rows + r] = in[r * s0 + c * s1] * fa + fb;
    return y;
}
"""

ext = load_inline(name="affine_crossed", cpp_sources=[cpp_source], functions=["affine_crossed"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, a: float, b: float):
        super().__init__()
        self.a = a
        self.b = b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.affine_crossed(x, self.a, self.b)
