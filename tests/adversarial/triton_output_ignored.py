"""Attack: a real Triton ReLU kernel is launched (so a kernel ran), its output is thrown away, and `forward`
returns PyTorch's own result.

Defence: the strict op policy (`aten.clamp_min` is compute). Under `partial` this would pass: that policy allows
PyTorch beside a kernel that runs and does not judge whether the kernel's output is used (op_policy's docstring).
Expected: rejected, dynamic:torch_compute_op.
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
        ignored = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 65536),)](x, ignored, n, BLOCK=65536)
        return x.clamp(min=0.0)
