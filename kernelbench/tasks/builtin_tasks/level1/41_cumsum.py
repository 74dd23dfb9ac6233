"""Inclusive prefix sum along the last dimension."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.cumsum along `dim`."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim)


# gpu size: 512M floats, 2 GiB in and 2 GiB out (~1.4 ms at ~3 TB/s). Rows stay at 4096 so the
# fp32 rounding of a different (parallel) summation order stays well inside the tolerance.
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
