"""Reverse (suffix) inclusive sum along the last dimension: y[i] = sum of x[i:]."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Suffix sums along `dim`, written as flip, cumsum, flip."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


# gpu size: 512M floats, 2 GiB in and 2 GiB out for the scan itself (~1.4 ms at ~3 TB/s; the two
# flips the reference makes add copies a fused kernel does not need).
batch_size = 16384  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
length = 4096
scan_dim = 1

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 256, "length": 4096}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37, "length": 1531}]


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return [scan_dim]
