"""Group normalization of an NCHW tensor (statistics per sample and channel group)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.GroupNorm with randomised scale and shift."""

    def __init__(self, num_groups: int, num_channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_channels)
        with torch.no_grad():
            self.gn.weight.copy_(1.0 + 0.1 * torch.randn(num_channels))
            self.gn.bias.copy_(0.1 * torch.randn(num_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


batch_size = 4  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
num_channels = 64
num_groups = 8
height = 512
width = 512

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 8, "num_channels": 32, "num_groups": 4, "height": 128, "width": 128}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "height": 37, "width": 29}]


def get_inputs():
    return [torch.randn(batch_size, num_channels, height, width)]


def get_init_inputs():
    return [num_groups, num_channels]
