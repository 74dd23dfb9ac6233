"""Transposed 2-D convolution that doubles the spatial size (kernel 4, stride 2, padding 1)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.ConvTranspose2d with bias, upsampling H x W to 2H x 2W."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


batch_size = 8  # gpu size: 128 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
in_channels = 64
out_channels = 32
kernel_size = 4
stride = 2
padding = 1
height = 256
width = 256

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 2, "in_channels": 16, "out_channels": 8, "height": 64, "width": 64}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "height": 19, "width": 23}]


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
