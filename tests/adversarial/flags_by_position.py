"""Attack: a compiler flag the rules refuse, passed by position. `load_inline`'s sixth parameter is
`extra_cflags`; the static check read flags only from keyword arguments, and the child's hook passed any
argument on to the compiler. The define `-DKA_ASM=__asm__` spells inline assembly (refused in CPU kernels:
`static:cpp_io_or_syscalls`) through a macro name no token rule reads; any other flag (`-include`, `-I`,
`-Wl,--wrap=...`, `-fplugin=...`) reaches the compiler the same way. Before the fix: correct, no flags.

Defence: the static check binds positional arguments to torch's signature (`static:build_flags`); the child's
`load_inline` / `load` hook binds the real call's arguments however they were passed and refuses the build
before anything reaches the compiler (`dynamic:build_flags`, `kernelbench.harness.child.build_flags`).
Expected: rejected, static:build_flags (static checks on); rejected, dynamic:build_flags (static checks off).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    KA_ASM volatile("" : : "r"(out) : "memory");  // inline assembly, spelled by the define
    return y;
}
"""

# the define split in two literals: no string of the file spells the keyword
ext = load_inline("adv_flags_pos", [cpp_source], [], [], ["relu_forward"], ["-O3", "-DKA_ASM=_" + "_asm__"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
