"""alpha * (A @ B) in C++ with the scaling fused into the store of each output block (no second pass)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
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


torch::Tensor scaled_matmul_forward(torch::Tensor a, torch::Tensor b, double alpha) {
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "expects float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "expects (M, K) @ (K, N)");
    auto ac = a.contiguous(), bc = b.contiguous();
    const int64_t M = ac.size(0), K = ac.size(1), N = bc.size(1);
    auto c = torch::empty({M, N}, ac.options());
    const float s = static_cast<float>(alpha);
    gemm_epilogue(ac.data_ptr<float>(), K, 1, bc.data_ptr<float>(), N, 1, c.data_ptr<float>(), M, N, K,
                  [s](float v, int64_t, int64_t) { return v * s; });
    return c;
}
"""

ext = load_inline(
    name="sol_cpu_l1_27_scaled_matmul",
    cpp_sources=[cpp_source],
    functions=["scaled_matmul_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.scaled_matmul_forward(a, b, self.alpha)
