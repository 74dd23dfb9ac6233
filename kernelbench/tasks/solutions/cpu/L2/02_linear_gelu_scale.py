"""gelu(x @ W^T + b) * scale in C++ (exact, erf-based GELU as F.gelu's default), fused into the GEMM's store."""
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


torch::Tensor linear_gelu_scale(torch::Tensor x, torch::Tensor w, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "expects float32");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "expects x (B, in) and W (out, in)");
    auto xc = x.contiguous(), wc = w.contiguous(), bc = bias.contiguous();
    const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0);
    TORCH_CHECK(bc.numel() == N, "bias must have out_features entries");
    auto y = torch::empty({M, N}, xc.options());
    const float* bp = bc.data_ptr<float>();
    const float s = static_cast<float>(scale);
    // B(k, j) = W[j, k]: the packing step reads W transposed, so W^T is never stored.
    gemm_epilogue(xc.data_ptr<float>(), K, 1, wc.data_ptr<float>(), 1, K, y.data_ptr<float>(), M, N, K,
                  [=](float v, int64_t, int64_t j) {
                      const float z = v + bp[j];
                      return 0.5f * z * (1.0f + std::erf(z * 0.70710678118654752f)) * s;
                  });
    return y;
}
"""

ext = load_inline(
    name="sol_cpu_l2_02_linear_gelu_scale",
    cpp_sources=[cpp_source],
    functions=["linear_gelu_scale"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.linear_gelu_scale(x, self.linear.weight, self.linear.bias, self.scale)
