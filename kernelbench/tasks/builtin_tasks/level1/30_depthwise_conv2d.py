"""Depthwise 2-D convolution (groups = channels), 3x3 kernel, same padding, NCHW."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Conv2d with groups equal to the channel count: one 3x3 filter per channel."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 2  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
channels = 128
kernel_size = 3
height = 512
width = 512

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 2, "channels": 32, "height": 128, "width": 128}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "height": 37, "width": 29}]


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]
