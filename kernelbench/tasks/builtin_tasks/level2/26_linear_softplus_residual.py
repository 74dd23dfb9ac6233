"""Square Linear layer, softplus, then a residual add of the input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = x + softplus(x @ W^T + b)."""

    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.softplus(self.linear(x))


batch_size = 8192   # gpu size: 2*8192*4096*4096 = 275 GFLOP
dim = 4096

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 128, "dim": 1024}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
