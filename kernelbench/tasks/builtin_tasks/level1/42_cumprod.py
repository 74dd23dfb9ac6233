"""Inclusive prefix product along the last dimension of values near 1."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.cumprod along `dim`."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=self.dim)


# gpu size: 512M floats, 2 GiB in and 2 GiB out (~1.4 ms at ~3 TB/s).
batch_size = 16384  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
length = 4096
scan_dim = 1

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 256, "length": 4096}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37, "length": 1531}]


def get_inputs():
    # signed noise around 1: factors 1 +- 0.01 keep running products within about e^+-2 over 4096 steps,
    # so nothing under- or overflows and the relative error of a reordered product stays small.
    return [1.0 + 0.01 * torch.randn(batch_size, length)]


def get_init_inputs():
    return [scan_dim]
