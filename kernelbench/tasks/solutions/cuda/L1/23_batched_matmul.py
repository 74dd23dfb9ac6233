"""Batched matmul in CUDA: one launch, the batch on the grid's z axis, tiled and register-blocked."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor bmm_forward(torch::Tensor a, torch::Tensor b);
"""

cuda_source = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>
#include <vector>

// C[z][i, j] = epi(sum_k A(i, k) B(k, j), i, j), A(i, k) = A[z * sa + i * sai + k * sak], B likewise; a
// 64 x 64 output tile per block of 256 threads, 4 x 4 outputs per thread in registers, 16-deep k slices
// staged through shared memory. Strides let nn.Linear's W^T and a transposed A be read in place; tile
// loads walk along whichever index is contiguous so global reads coalesce. Products accumulate in double:
// the reference's own fp32 rounding already uses most of the 1e-4 tolerance for long K, so this kernel
// must add (almost) none.
constexpr int TILE_M = 64, TILE_N = 64, TILE_K = 16;

template <class Epi>
__global__ void __launch_bounds__(256) gemm_kernel(
        const float* __restrict__ A, int64_t sa, int64_t sai, int64_t sak,
        const float* __restrict__ B, int64_t sb, int64_t sbk, int64_t sbj,
        float* __restrict__ C, int64_t sc, int M, int N, int K, Epi epi) {
    __shared__ float As[TILE_K][TILE_M + 4];
    __shared__ float Bs[TILE_K][TILE_N + 4];
    A += blockIdx.z * sa;
    B += blockIdx.z * sb;
    C += blockIdx.z * sc;
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * TILE_M, col0 = blockIdx.x * TILE_N;
    double acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        #pragma unroll
        for (int l = 0; l < 4; ++l) {
            const int e = tid + l * 256;
            const int r = sak == 1 ? e / TILE_K : e % TILE_M;
            const int kk = sak == 1 ? e % TILE_K : e / TILE_M;
            const int gi = row0 + r, gk = k0 + kk;
            As[kk][r] = (gi < M && gk < K) ? A[(int64_t)gi * sai + (int64_t)gk * sak] : 0.0f;
        }
        #pragma unroll
        for (int l = 0; l < 4; ++l) {
            const int e = tid + l * 256;
            const int c = sbj == 1 ? e % TILE_N : e / TILE_K;
            const int kk = sbj == 1 ? e / TILE_N : e % TILE_K;
            const int gk = k0 + kk, gj = col0 + c;
            Bs[kk][c] = (gk < K && gj < N) ? B[(int64_t)gk * sbk + (int64_t)gj * sbj] : 0.0f;
        }
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            float a[4], b[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
            #pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx * 4 + j];
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fma((double)a[i], (double)b[j], acc[i][j]);
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int gi = row0 + ty * 4 + i;
        if (gi >= M) continue;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int gj = col0 + tx * 4 + j;
            if (gj < N) C[(int64_t)gi * N + gj] = epi((float)acc[i][j], gi, gj);
        }
    }
}

template <class Epi>
static void launch_gemm(const float* A, int64_t sa, int64_t sai, int64_t sak,
                        const float* B, int64_t sb, int64_t sbk, int64_t sbj,
                        float* C, int64_t sc, int64_t M, int64_t N, int64_t K, int64_t batch, Epi epi) {
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "matrix too large");
    TORCH_CHECK((M + TILE_M - 1) / TILE_M <= 65535 && batch <= 65535, "grid too large");
    if (M == 0 || N == 0 || batch == 0) return;
    dim3 grid((unsigned)((N + TILE_N - 1) / TILE_N), (unsigned)((M + TILE_M - 1) / TILE_M), (unsigned)batch);
    gemm_kernel<Epi><<<grid, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        A, sa, sai, sak, B, sb, sbk, sbj, C, sc, (int)M, (int)N, (int)K, epi);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

struct Identity {
    __device__ __forceinline__ float operator()(float v, int, int) const { return v; }
};

torch::Tensor bmm_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "expects float32 CUDA tensors");
    TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
                "expects (B, M, K) @ (B, K, N)");
    auto ac = a.contiguous(), bc = b.contiguous();
    const int64_t batch = ac.size(0), M = ac.size(1), K = ac.size(2), N = bc.size(2);
    auto c = torch::empty({batch, M, N}, ac.options());
    // blockIdx.z walks the batch; one launch covers every product.
    launch_gemm(ac.data_ptr<float>(), M * K, K, 1, bc.data_ptr<float>(), K * N, N, 1, c.data_ptr<float>(), M * N,
                M, N, K, batch, Identity{});
    return c;
}
"""

ext = load_inline(
    name="sol_cuda_l1_23_batched_matmul",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["bmm_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ext.bmm_forward(a, b)
