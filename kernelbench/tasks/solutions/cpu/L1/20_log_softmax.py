"""Row log-softmax in C++: x - max - log(sum(exp(x - max))), never forming softmax itself, so large
negative log-probabilities stay finite; exp is a four-lane polynomial (no libm calls in the row loop)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
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

// Largest entry of a row, four lanes at a time.
static inline float row_max(const float* xr, int64_t cols) {
    v4f mv = splat4(-INFINITY);
    int64_t c = 0;
    for (; c + 4 <= cols; c += 4) {
        const v4f v = load4(xr + c);
        mv = v > mv ? v : mv;
    }
    float m = std::max(std::max(mv[0], mv[1]), std::max(mv[2], mv[3]));
    for (; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    return m;
}

// Writes exp(x - m) to yr (when yr is not null) and returns the sum of those values.
static inline float row_exp_sum(const float* xr, float* yr, int64_t cols, float m) {
    const v4f mv = splat4(m);
    v4f acc = splat4(0.0f);
    int64_t c = 0;
    for (; c + 4 <= cols; c += 4) {
        const v4f e = exp4(load4(xr + c) - mv);
        if (yr) store4(yr + c, e);
        acc += e;
    }
    float s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (; c < cols; ++c) {
        const float e = exp4(splat4(xr[c] - m))[0];
        if (yr) yr[c] = e;
        s += e;
    }
    return s;
}

torch::Tensor log_softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2, "log_softmax_rows expects a 2-D float32 tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = in + r * cols;
        float* yr = out + r * cols;
        const float m = row_max(xr, cols);
        const float shift = m + std::log(row_exp_sum(xr, nullptr, cols, m));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - shift;
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l1_20_log_softmax",
    cpp_sources=[cpp_source],
    functions=["log_softmax_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.log_softmax_rows(x)
