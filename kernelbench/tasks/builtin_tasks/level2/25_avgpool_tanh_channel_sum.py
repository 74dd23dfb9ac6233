"""2x2 average pooling, tanh, then sum over the channels."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = sum_c tanh(avgpool2x2(x))[:, c]; output is (batch, 1, height/2, width/2).

    tanh rather than sigmoid keeps the summands signed: a sum of many sigmoids sits near count/2
    for every input and a constant would pass a relative tolerance.
    """

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.pool(x)).sum(dim=1, keepdim=True)


batch_size = 16  # gpu size: 256 MiB in, 1 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
channels = 64
height = 256
width = 256

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 4, "channels": 16, "height": 128, "width": 128}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "channels": 7, "height": 37, "width": 29}]


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
