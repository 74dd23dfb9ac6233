"""Row walk. Writes a row-major output row by row, reading the input through its strides: every access is
sequential when the input is row-major, and the reads jump a column's length apart when it is column-major.

The three walks of this family share every line but the first of the C++ source, so the walk is chosen once,
right after the summary that names it."""
import torch
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="affine_rows", cpp_sources=[r"""
constexpr bool row_major_out = true, row_by_row = true;
#include <torch/extension.h>
torch::Tensor f(torch::Tensor x, double a, double b) {
    const int64_t R = x.size(0), C = x.size(1), s = x.stride(0), t = x.stride(1);
    auto y = row_major_out ? torch::empty({R, C}, x.options()) : torch::empty({C, R}, x.options()).t();
    const int64_t u = row_major_out ? C : 1, v = row_major_out ? 1 : R;
    const float* i = x.data_ptr<float>();
    float* o = y.data_ptr<float>();
    const float A = a, B = b;
    if (row_by_row)
        for (int64_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < C; ++c)
                o[r * u + c * v] = i[r * s + c * t] * A + B;
    else
        for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
                o[r * u + c * v] = i[r * s + c * t] * A + B;
    return y;
}"""], functions=["f"], extra_cflags=["-O3"])


class ModelNew(torch.nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):
        return ext.f(x, self.a, self.b)
