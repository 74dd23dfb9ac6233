"""Adaptive 2-D average pooling to a 7x7 output (uneven windows), NCHW."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.AdaptiveAvgPool2d: window i spans [floor(i*H/7), ceil((i+1)*H/7))."""

    def __init__(self, output_size: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 4  # gpu size: 207 MiB in, 0 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
channels = 256
height = 230
width = 230
output_size = 7

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 4, "channels": 128, "height": 60, "width": 60}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "channels": 5, "height": 45, "width": 51}]


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [output_size]
