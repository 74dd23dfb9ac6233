"""Attack: a refused compiler flag whose spelling no source rule reads: `load_inline` under another name,
its arguments unpacked from a tuple and a dict (`*ARGS, **OPTIONS`), the define computed from pieces
(`-DKA_ASM=__asm__`: inline assembly in a CPU kernel through a macro). tests/test_build_flags.py also runs
it with the flags by position, as keywords only, and with the refusal caught and PyTorch doing the work.
Before the fix, with static checks off: correct, no flags (the child's hook passed every argument on).

Defence: the child's `load_inline` hook binds the real call's arguments to torch's signature, whatever
their spelling, and refuses the build before anything is written or compiled; the refusal is recorded
outside the candidate's reach, so catching the error changes nothing (`kernelbench.harness.child.build_flags`).
The static check sees the alias and refuses `*args` / `**kwargs`.
Expected: rejected, static:build_flags (static checks on); rejected, dynamic:build_flags (static checks off).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline as build

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

FLAGS = ["-O3", "-D" + "KA_ASM=" + "_" + "_asm__"]
ARGS = ("adv_flags_unpacked", [cpp_source], [], [], ["relu_forward"])
OPTIONS = {"extra_cflags": FLAGS}
ext = build(*ARGS, **OPTIONS)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
