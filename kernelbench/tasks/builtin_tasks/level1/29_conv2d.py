"""2-D convolution, 3x3 kernel, stride 1, same padding, NCHW."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Conv2d with bias, square kernel, padding kernel_size // 2."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 8  # gpu size: 128 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
in_channels = 64
out_channels = 128
kernel_size = 3
height = 256
width = 256

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 2, "in_channels": 16, "out_channels": 32, "height": 64, "width": 64}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "height": 37, "width": 29}]


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
