"""Affine transform, tanh-GELU, scale (all per column): one fused elementwise Triton kernel."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Triton's interpreter (CPU) runs every program of the grid as numpy code, so it wants few, large blocks;
# a GPU wants many programs of a few warps each.
GPU_BLOCK = 1024
CPU_BLOCK = 1 << 16


@triton.jit
def affine_gelu_scale_kernel(x_ptr, a_ptr, b_ptr, c_ptr, y_ptr, n, dim, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % dim
    x = tl.load(x_ptr + offs, mask=mask)
    a = tl.load(a_ptr + col, mask=mask)
    b = tl.load(b_ptr + col, mask=mask)
    c = tl.load(c_ptr + col, mask=mask)
    v = x * a + b
    inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    y = 0.5 * v * (1.0 + (1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0))) * c
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.a = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))
        self.c = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = GPU_BLOCK if x.is_cuda else CPU_BLOCK
        affine_gelu_scale_kernel[(triton.cdiv(n, block),)](x, self.a, self.b, self.c, y, n, x.shape[-1], BLOCK=block)
        return y
