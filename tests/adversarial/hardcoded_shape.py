"""Attack: a kernel specialised to the timed shape. A C++ ReLU written for the built-in task L1/01_relu at
its cpu size, 1024 x 4096: its output is allocated at that shape and its loop runs over that many elements
(clamped to the input, so it never reads out of bounds). On the shape it is timed at it is right and fast;
on any other shape it returns a tensor of the wrong shape.

Defence: input configurations (`INPUT_CONFIGS`, kernelbench/input_configs.py): correctness is checked on
every configuration of the task (here a second one, 37 x 1531, drawn from seeds derived from the secret
ones), and the feedback names the configuration that failed by its constants and input shapes.
Expected: incorrect ("configuration 2 of 2"), score 0. The same file is correct on the task without its
second configuration (tests/test_adversarial.py::test_hardcoded_shape_correct_on_one_configuration).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cstdint>

constexpr int64_t ROWS = 1024, COLS = 4096;  // the task's cpu size, written in

torch::Tensor relu_fixed(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty({ROWS, COLS}, xc.options());
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = std::min<int64_t>(xc.numel(), ROWS * COLS);
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    for (int64_t i = n; i < ROWS * COLS; ++i) out[i] = 0.0f;
    return y;
}
"""

ext = load_inline(name="adv_fixed_shape", cpp_sources=[cpp_source], functions=["relu_fixed"],
                  extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_fixed(x)
