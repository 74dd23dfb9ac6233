"""softmax(a @ b, dim=-1) in C++: a packed register-blocked GEMM, then an in-place row softmax with a
vectorizable exp; no temporaries beyond the output."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

// C[i, j] = epi(sum_k A(i, k) * B(k, j), i, j) for an (M, K) by (K, N) product. A(i, k) = A[i * sai + k * sak]
// and B(k, j) = B[k * sbk + j * sbj], so transposed operands (nn.Linear's W^T) need no copy of their own.
// B is packed once into column panels of NR floats laid out k-major: each panel streams contiguously
// (no 4 KiB-stride aliasing between rows of B) and stays in cache while 4-row blocks of A sweep over it.
// Products accumulate in double: the reference's own fp32 rounding already uses most of the 1e-4
// tolerance at K in the hundreds with inputs scaled by 3, so this kernel must add (almost) none.
// The 4 x 4 micro-kernel keeps its accumulators in eight SSE2 registers (GCC vector extension; baseline
// x86-64 flags, no -march).
typedef double v2d __attribute__((vector_size(16)));

template <class Epi>
static void gemm_epilogue(const float* A, int64_t sai, int64_t sak, const float* B, int64_t sbk, int64_t sbj,
                          float* C, int64_t M, int64_t N, int64_t K, Epi epi) {
    constexpr int64_t MR = 4, NR = 4;
    const int64_t Mb = M / MR * MR, Nb = N / NR * NR;
    std::vector<double> packed(static_cast<size_t>(K * Nb));
    double* pk = packed.data();
    #pragma omp parallel for schedule(static)
    for (int64_t j0 = 0; j0 < Nb; j0 += NR)
        for (int64_t k = 0; k < K; ++k)
            for (int64_t j = 0; j < NR; ++j) pk[j0 * K + k * NR + j] = B[k * sbk + (j0 + j) * sbj];
    #pragma omp parallel for schedule(static)
    for (int64_t j0 = 0; j0 < Nb; j0 += NR) {
        const double* bp = pk + j0 * K;
        for (int64_t i0 = 0; i0 < Mb; i0 += MR) {
            v2d c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {}, c30 = {}, c31 = {};
            const float* a = A + i0 * sai;
            for (int64_t k = 0; k < K; ++k) {
                v2d b0, b1;
                std::memcpy(&b0, bp + k * NR, sizeof(b0));
                std::memcpy(&b1, bp + k * NR + 2, sizeof(b1));
                const float* ak = a + k * sak;
                const double a0 = ak[0], a1 = ak[sai], a2 = ak[2 * sai], a3 = ak[3 * sai];
                c00 += a0 * b0; c01 += a0 * b1; c10 += a1 * b0; c11 += a1 * b1;
                c20 += a2 * b0; c21 += a2 * b1; c30 += a3 * b0; c31 += a3 * b1;
            }
            const v2d acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
            for (int64_t r = 0; r < MR; ++r) {
                float* c = C + (i0 + r) * N + j0;
                for (int64_t j = 0; j < NR; ++j) c[j] = epi(static_cast<float>(acc[r][j / 2][j % 2]), i0 + r, j0 + j);
            }
        }
    }
    // Ragged edges (M or N not a multiple of 4): plain dot products, also in double.
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        const int64_t j_start = i < Mb ? Nb : 0;
        for (int64_t j = j_start; j < N; ++j) {
            double s = 0.0;
            for (int64_t k = 0; k < K; ++k) s += static_cast<double>(A[i * sai + k * sak]) * B[k * sbk + j * sbj];
            C[i * N + j] = epi(static_cast<float>(s), i, j);
        }
    }
}

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

torch::Tensor matmul_softmax(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "expects float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "expects (M, K) @ (K, N)");
    auto ac = a.contiguous(), bc = b.contiguous();
    const int64_t M = ac.size(0), K = ac.size(1), N = bc.size(1);
    auto y = torch::empty({M, N}, ac.options());
    gemm_epilogue(ac.data_ptr<float>(), K, 1, bc.data_ptr<float>(), N, 1, y.data_ptr<float>(), M, N, K,
                  [](float v, int64_t, int64_t) { return v; });
    // Softmax of each row in place: max, exp and sum, scale.
    float* yp = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        float* row = yp + i * N;
        const float m = row_max(row, N);
        const float s = row_exp_sum(row, row, N, m);  // in place: each entry is read before it is overwritten
        const float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t j = 0; j < N; ++j) row[j] *= inv;
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l2_07_matmul_softmax",
    cpp_sources=[cpp_source],
    functions=["matmul_softmax"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.matmul_softmax(a, b)
