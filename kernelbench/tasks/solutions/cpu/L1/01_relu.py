"""ReLU in one C++ pass over the flat buffer, four lanes at a time."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstdint>
#include <cstring>

// Four-lane float vectors (GCC vector extension, baseline SSE2). Comparisons yield lane masks and `?:`
// selects per lane, so the code below has no data-dependent branches: the compiler must vectorize it,
// which plain loops with conditionals (or libm calls) do not get under the default -ftrapping-math.
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f splat4(float a) { return v4f{a, a, a, a}; }
static inline v4f load4(const float* p) { v4f v; std::memcpy(&v, p, sizeof(v)); return v; }
static inline void store4(float* p, v4f v) { std::memcpy(p, &v, sizeof(v)); }

// The elementwise function on four lanes; p0 and p1 carry the module's constants (unused ones are 0).
static inline v4f op4(v4f v, float p0, float p1) {
    return v < 0.0f ? splat4(0.0f) : v;  // a NaN lane fails the comparison and passes through, as in torch
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward expects float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    const int64_t n4 = n / 4 * 4;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n4; i += 4) store4(out + i, op4(load4(in + i), 0.0f, 0.0f));
    if (n4 < n) {  // the last 1-3 elements: padded to four lanes, only the real ones stored
        float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        std::memcpy(buf, in + n4, (n - n4) * sizeof(float));
        const v4f r = op4(load4(buf), 0.0f, 0.0f);
        std::memcpy(out + n4, &r, (n - n4) * sizeof(float));
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_01_relu",
    cpp_sources=[cpp_source],
    functions=["relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
