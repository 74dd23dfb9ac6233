"""The Triton control: an honest `@triton.jit` ReLU.

On CPU its kernel runs under Triton's interpreter, so it is judged for correctness only.
Expected: correct, flag `interpreted`, speedup 0, score = the correctness weight (0.3) and nothing more.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = 1024 if x.is_cuda else 65536
        relu_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
        return y
