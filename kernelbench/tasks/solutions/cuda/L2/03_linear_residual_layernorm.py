"""LayerNorm(x @ W^T + b + residual) in CUDA: bias and residual added in the GEMM's store, then one
in-place row LayerNorm kernel; the reference makes an extra full-size temporary and three more passes."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor linear_residual_layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor bias, torch::Tensor residual,
                                        torch::Tensor gamma, torch::Tensor beta, double eps);
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

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum over the whole block, returned to every thread. blockDim.x is a multiple of 32; `scratch` holds
// 32 floats of shared memory. The first barrier lets consecutive calls reuse the same scratch.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

// In-place LayerNorm of each row (one block per row), two-pass mean and variance.
__global__ void layer_norm_inplace(float* __restrict__ y, const float* __restrict__ g, const float* __restrict__ b,
                                   int64_t cols, float eps) {
    __shared__ float scratch[32];
    float* row = y + (int64_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    const float mean = block_sum(s, scratch) / (float)cols;
    float q = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = row[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, scratch) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) row[c] = (row[c] - mean) * rstd * g[c] + b[c];
}

struct BiasResidual {
    const float* bias;
    const float* residual;
    int64_t cols;
    __device__ __forceinline__ float operator()(float v, int i, int j) const {
        return v + bias[j] + residual[(int64_t)i * cols + j];
    }
};

torch::Tensor linear_residual_layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor bias, torch::Tensor residual, torch::Tensor gamma, torch::Tensor beta, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32,
                "expects float32 CUDA tensors");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "expects x (B, in) and W (out, in)");
    auto xc = x.contiguous(), wc = w.contiguous(), bc = bias.contiguous();
    const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0);
    TORCH_CHECK(bc.numel() == N, "bias must have out_features entries");
    auto y = torch::empty({M, N}, xc.options());
    auto rc = residual.contiguous(), gc = gamma.contiguous(), bec = beta.contiguous();
    TORCH_CHECK(rc.numel() == M * N && gc.numel() == N && bec.numel() == N, "shape mismatch");
    // B(k, j) = W[j, k]: strides (1, K) read nn.Linear's weight as W^T in place.
    launch_gemm(xc.data_ptr<float>(), 0, K, 1, wc.data_ptr<float>(), 0, 1, K, y.data_ptr<float>(), 0, M, N, K, 1, BiasResidual{bc.data_ptr<float>(), rc.data_ptr<float>(), N});
    if (M > 0 && N > 0) {
        TORCH_CHECK(M <= 2147483647LL, "too many rows");
        layer_norm_inplace<<<(unsigned)M, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
            y.data_ptr<float>(), gc.data_ptr<float>(), bec.data_ptr<float>(), N, (float)eps);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

ext = load_inline(
    name="sol_cuda_l2_03_linear_residual_layernorm",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["linear_residual_layernorm"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(out_features))
            self.norm.bias.copy_(0.1 * torch.randn(out_features))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return ext.linear_residual_layernorm(x, self.linear.weight, self.linear.bias, residual,
                                             self.norm.weight, self.norm.bias, self.norm.eps)
