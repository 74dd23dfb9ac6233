"""RMSNorm over the last dimension: one Triton program per block of rows; each row is read once and written once."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Triton's interpreter (CPU) runs every program of the grid as numpy code, so it wants few, large blocks;
# a GPU wants many programs of a few warps each.
GPU_BLOCK = 1024
CPU_BLOCK = 1 << 16


def row_tile(cols: int, on_gpu: bool) -> tuple[int, int]:
    """(rows per program, padded row length): one row per program on a GPU, about CPU_BLOCK elements under
    the interpreter."""
    block_n = triton.next_power_of_2(cols)
    return (1 if on_gpu else max(1, CPU_BLOCK // block_n)), block_n


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, rows, cols, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK_N)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    offs = r[:, None].to(tl.int64) * cols + c[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    rms = tl.sqrt(tl.sum(x * x, axis=1) / cols + eps)
    w = tl.load(w_ptr + c, mask=c < cols, other=0.0)
    y = x / rms[:, None] * w[None, :]
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols
        per_program, block_n = row_tile(cols, x.is_cuda)
        rms_norm_kernel[(triton.cdiv(rows, per_program),)](x, self.weight, y, rows, cols, self.eps, ROWS=per_program,
                        BLOCK_N=block_n, num_warps=min(16, max(4, block_n // 1024)))
        return y
