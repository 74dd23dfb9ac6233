"""Transformer MLP block: Linear, GELU, Linear, with a residual connection."""
import torch
import torch.nn as nn

OP_POLICY = "partial"


class Model(nn.Module):
    """y = x + fc2(gelu(fc1(x))) over (batch, seq_len, dim) tokens."""

    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))


batch_size = 16     # gpu size: 2 * 2*8192*1024*4096 = 137 GFLOP
seq_len = 512
dim = 1024
hidden_dim = 4096

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 2, "seq_len": 64, "dim": 256, "hidden_dim": 1024}


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim, hidden_dim]
