"""Pre-norm transformer block: LayerNorm, causal multi-head attention, residual; LayerNorm, GELU MLP, residual."""
import math

import torch
import torch.nn as nn

OP_POLICY = "partial"


class Model(nn.Module):
    """x = x + attn(ln1(x)); x = x + mlp(ln2(x)), with a causal mask and a 4x GELU MLP, no dropout."""

    def __init__(self, dim: int, num_heads: int, seq_len: int):
        super().__init__()
        assert dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        # Wider than nn.Linear's default U(+-1/sqrt(dim)): with it the attention logits have spread ~0.3,
        # softmax is near uniform, and a kernel averaging v over all positions would pass a tolerance.
        with torch.no_grad():
            self.qkv.weight.copy_(torch.randn(3 * dim, dim) * (1.5 / dim ** 0.5))
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.register_buffer("causal", torch.ones(seq_len, seq_len, dtype=torch.bool).tril())

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        qkv = self.qkv(x).reshape(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~self.causal[:s, :s], float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, d)
        return self.proj(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


batch_size = 16     # gpu size: attention 86 GFLOP + MLP 137 GFLOP
seq_len = 512
dim = 1024
num_heads = 16

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 2, "seq_len": 64, "dim": 256, "num_heads": 4}


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim, num_heads, seq_len]
