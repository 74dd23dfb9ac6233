"""3x3 Conv2d, hardtanh, then global average pooling over height and width."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = mean_{h,w} hardtanh(conv3x3(x)); output is (batch, out_channels, 1, 1)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        # A wide bias makes the per-channel means differ clearly from zero; with the default init the
        # pooled outputs are all ~0.03 and a zero result would come within an absolute tolerance.
        with torch.no_grad():
            self.conv.bias.copy_(0.5 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.hardtanh(self.conv(x), min_val=-0.5, max_val=0.5)
        return y.mean(dim=(2, 3), keepdim=True)


batch_size = 64     # gpu size: 2*64*64*128*128*32*9 = 38.7 GFLOP
in_channels = 32
out_channels = 64
height = 128
width = 128

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 4, "in_channels": 16, "out_channels": 32, "height": 48, "width": 48}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "height": 37, "width": 29}]


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
