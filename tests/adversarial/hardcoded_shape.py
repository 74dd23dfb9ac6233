"""Attack: a kernel specialised to the timed shape. A C++ max over dim 1 written for the built-in task
L1/12_max_dim at its cpu size, 16 x 256 x 256: its output is allocated at that shape and its loops run over
those extents (skipping reads past the input, so it never leaves the buffer). On the shape it is timed at it
is right; on any other shape it returns a tensor of the wrong shape.

Defence: input configurations (`INPUT_CONFIGS`, kernelbench/tasks/input_configs.py): correctness is checked on
every configuration of the task (here a second one, 3 x 77 x 131, drawn from seeds derived from the secret
ones), and the feedback names the configuration that failed by its constants and input shapes.
Expected: incorrect ("configuration 2 of 2"), score 0. The same file is correct on the task without its
second configuration (tests/test_adversarial.py::test_hardcoded_shape_correct_on_one_configuration).
"""
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
        return ext.max_fixed(x)
