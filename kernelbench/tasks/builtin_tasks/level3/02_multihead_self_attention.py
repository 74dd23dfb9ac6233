"""Multi-head self-attention written with matmuls and softmax (fused QKV projection, output projection)."""
import math

import torch
import torch.nn as nn

OP_POLICY = "partial"


class Model(nn.Module):
    """Bidirectional multi-head self-attention over (batch, seq_len, dim); no masking, no dropout."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        assert dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        # Wider than nn.Linear's default U(+-1/sqrt(dim)): with it the attention logits have spread ~0.3,
        # softmax is near uniform, and a kernel averaging v over all positions would pass a tolerance.
        with torch.no_grad():
            self.qkv.weight.copy_(torch.randn(3 * dim, dim) * (1.5 / dim ** 0.5))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        qkv = self.qkv(x).reshape(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                       # each (b, heads, s, head_dim)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, d)
        return self.proj(out)


batch_size = 16     # gpu size: projections 69 GFLOP + attention 17 GFLOP; 268 MB of scores
seq_len = 512
dim = 1024
num_heads = 16

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 2, "seq_len": 128, "dim": 256, "num_heads": 4}


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim, num_heads]
