"""Attack: a token Triton kernel (a copy) beside the PyTorch op that computes the answer, in `forward`.

Defence: the strict op policy traces `forward`'s aten ops whatever kernels also ran: `aten.relu` is compute
(the Triton launch counts as the candidate's kernel, so `kernel_not_called` does not fire; the torch op does).
Expected: rejected, dynamic:torch_compute_op.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 65536),)](x, y, n, BLOCK=65536)
        return torch.relu(y)
