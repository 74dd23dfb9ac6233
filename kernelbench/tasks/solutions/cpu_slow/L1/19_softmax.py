"""Row softmax in C++, written the slow way: libm's scalar exp evaluated twice per element (once for
the sum, again for the output), a divide per element, and the row walked three times."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax_rows_slow(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2, "softmax_rows_slow expects a 2-D float32 tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = in + r * cols;
        float m = xr[0];
        for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, xr[c]);
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) s += std::exp(xr[c] - m);
        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(xr[c] - m) / s;
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_slow_l1_19_softmax",
    cpp_sources=[cpp_source],
    functions=["softmax_rows_slow"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_rows_slow(x)
