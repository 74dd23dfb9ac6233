"""Maximum value over the middle dimension of a 3-D tensor (values only)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Takes the maximum of x over `dim`, dropping that dimension."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim).values


batch_size = 16  # gpu size: 256 MiB in, 0 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
dim1 = 4096
dim2 = 1024
reduce_dim = 1

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 16, "dim1": 256, "dim2": 256}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "dim1": 77, "dim2": 131}]


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
