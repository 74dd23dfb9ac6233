"""A * s in C++, written the slow way: the outer loop runs over columns, so consecutive accesses are a
row apart (16 KB at the CPU size): every load and store touches a new cache line and nothing vectorizes.
The same code as the `cpu` solution with its two loops swapped."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor scale_forward(torch::Tensor a, double s) {
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && a.dim() == 2, "scale_forward expects a 2-D float32 tensor");
    auto x = a.contiguous();
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t rows = x.size(0), cols = x.size(1);
    const float f = (float)s;
    for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r)
            out[r * cols + c] = in[r * cols + c] * f;
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_slow_l1_26_matrix_scalar_multiply",
    cpp_sources=[cpp_source],
    functions=["scale_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, s: float):
        super().__init__()
        self.s = s

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return ext.scale_forward(a, self.s)
