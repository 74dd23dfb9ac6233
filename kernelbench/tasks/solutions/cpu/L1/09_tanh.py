"""tanh in one C++ pass as 1 - 2 / (exp(2x) + 1) with a four-lane polynomial exp (saturates cleanly
at +-1); eager PyTorch evaluates tanh element by element here."""
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

// exp(x) = 2^n * e^r with n = round(x / ln 2), |r| <= ln2 / 2, e^r by the Cephes expf polynomial
// (about 1 ulp); inputs are clamped to [-87, 88] so 2^n stays a normal float.
static inline v4f exp4(v4f x) {
    const v4f lo = splat4(-87.0f), hi = splat4(88.0f);
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    const v4f t = x * 1.44269504088896341f;
    const v4f n = (t + 12582912.0f) - 12582912.0f;  // round to nearest: the 1.5 * 2^23 trick
    const v4f r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    v4f p = splat4(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const v4i bits = (__builtin_convertvector(n, v4i) + 127) << 23;
    v4f scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

// The elementwise function on four lanes; p0 and p1 carry the module's constants (unused ones are 0).
static inline v4f op4(v4f v, float p0, float p1) {
    return 1.0f - 2.0f / (exp4(2.0f * v) + 1.0f);
}

torch::Tensor tanh_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "tanh_forward expects float32");
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
    name="sol_cpu_l1_09_tanh",
    cpp_sources=[cpp_source],
    functions=["tanh_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.tanh_forward(x)
