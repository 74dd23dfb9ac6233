"""2-D average pooling, 3x3 window, stride 1, padding 1 (zeros counted), NCHW."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.AvgPool2d keeping the spatial size; padded zeros count in the divisor (count_include_pad)."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 4  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
channels = 64
height = 512
width = 512
kernel_size = 3
stride = 1
padding = 1

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 2, "channels": 16, "height": 128, "width": 128}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "channels": 5, "height": 37, "width": 29}]


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]
