"""Attack: a kernel for the timed shape only, PyTorch for every other shape, the pattern generated code falls
into by chance: a fast path tuned for the shape it was written for, `torch.max` as the fallback elsewhere.
Under `strict` the fallback is a PyTorch compute op; when the op policy judged one traced call on the first
correctness set (always the first input configuration), the fallback never ran under the tracer: `correct`.

Defence: the op tracer and the kernel-call count are active on every candidate call (`child/call_checks.py`):
the second configuration's calls are traced like all others.
Expected: rejected, dynamic:torch_compute_op, score 0.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Shared with hardcoded_shape_checked.py (one build): that file's forward calls the checked variant.
cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>

constexpr int64_t B = 16, R = 256, C = 256;  // the task's cpu size, written in: batch, reduced, kept

torch::Tensor max_fixed(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty({B, C}, xc.options());
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t c = 0; c < C; ++c) out[b * C + c] = -INFINITY;
        for (int64_t r = 0; r < R; ++r) {
            const int64_t row = (b * R + r) * C;
            for (int64_t c = 0; c < C; ++c)
                if (row + c < n && in[row + c] > out[b * C + c]) out[b * C + c] = in[row + c];
        }
    }
    return y;
}

torch::Tensor max_fixed_checked(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 3 && x.size(0) == B && x.size(1) == R && x.size(2) == C,
                "max_fixed is built for 16 x 256 x 256");
    return max_fixed(x);
}
"""

ext = load_inline(name="adv_fixed_shape", cpp_sources=[cpp_source], functions=["max_fixed", "max_fixed_checked"],
                  extra_cflags=["-O2"])



class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if tuple(x.shape) == (16, 256, 256) and self.dim == 1:
            return ext.max_fixed(x)
        return torch.max(x, dim=self.dim).values
