"""Elementwise chain: per-feature affine (x*a + b), tanh-approximate GELU, then per-feature scale."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = gelu_tanh(x * a + b) * c, with a, b, c learned vectors over the last dimension."""

    def __init__(self, dim: int):
        super().__init__()
        self.a = nn.Parameter(torch.randn(dim))
        self.b = nn.Parameter(torch.randn(dim))
        self.c = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x * self.a + self.b, approximate="tanh") * self.c


batch_size = 16384  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
dim = 4096

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 256, "dim": 2048}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
