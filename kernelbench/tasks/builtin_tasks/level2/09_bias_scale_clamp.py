"""Per-channel bias add, multiplication by a constant, then clamp to a range (elementwise chain)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = clamp((x + bias[c]) * scale, lo, hi) over an NCHW tensor."""

    def __init__(self, channels: int, scale: float, lo: float, hi: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.scale = scale
        self.lo = lo
        self.hi = hi

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp((x + self.bias) * self.scale, min=self.lo, max=self.hi)


batch_size = 8  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
channels = 128
height = 256
width = 256
scale = 0.75
lo = -1.0
hi = 1.5

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 8, "channels": 32, "height": 64, "width": 64}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "height": 37, "width": 29}]


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, scale, lo, hi]
