"""SwiGLU gate: two bias-free projections of the same input, silu of one times the other."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = silu(x @ W_gate^T) * (x @ W_up^T), the gated half of a LLaMA-style MLP."""

    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden_dim, bias=False)
        self.up = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(self.gate(x)) * self.up(x)


batch_size = 4096   # gpu size: 2 * 2*4096*4096*4096 = 275 GFLOP
dim = 4096
hidden_dim = 4096

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 128, "dim": 512, "hidden_dim": 1024}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, hidden_dim]
