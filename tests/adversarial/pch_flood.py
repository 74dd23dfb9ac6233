"""Attack: exhaust the host's disk and CPU through the precompiled headers. The parent built a ~170 MB PCH,
outside the sandbox and with no quota, for every distinct tuple of allowed flags: `["-O3", "-O3"]`,
`["-O3", "-O3", "-O3"]`... each a new minute of compiler time and a new file. The test varies the list
given below; the kernel itself is an honest ReLU.

Defence: PCHs only for a fixed set of normalised flag sets (deduplicated, sorted:
kernelbench.harness.build.pch.PCH_FLAG_SETS), built in a sandboxed child, under a size quota with eviction
(`PCH_QUOTA_MB`). Any other flag list compiles with an existing PCH or none.
Expected: correct (an honest ReLU), and no PCH built for any of the flooding lists.
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
    for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    return y;
}
"""

ext = load_inline(name="adv_pch_flood", cpp_sources=[cpp_source], functions=["relu_forward"],
                  extra_cflags=["-O3", "-fopenmp", "-O3", "-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
