"""Attack: `tl.inline_asm_elementwise` in a Triton kernel, to run code of the candidate's choosing past the
rules the interpreter's Python follows.

Defence: static `triton_escape` on CPU (on CUDA it is inline PTX, allowed as in CUDA C); with static checks
off, Triton's interpreter refuses inline assembly at the launch.
Expected: rejected, static:triton_escape; static off: runtime_error ("inline_asm not supported").
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
    y = tl.inline_asm_elementwise("max.f32 $0, $1, 0f00000000;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                  pack=1)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 65536),)](x, y, n, BLOCK=65536)
        return y
