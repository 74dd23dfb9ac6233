"""MobileNet-style depthwise-separable block: depthwise conv3x3-BN-ReLU6, pointwise conv1x1-BN-ReLU6."""
import torch
import torch.nn as nn
import torch.nn.functional as F

OP_POLICY = "partial"


def _inference_bn(channels: int) -> nn.BatchNorm2d:
    """A BatchNorm2d with drawn running statistics and affine parameters, put in eval mode."""
    bn = nn.BatchNorm2d(channels)
    with torch.no_grad():
        bn.running_mean.copy_(0.1 * torch.randn(channels))
        bn.running_var.copy_(0.5 + torch.rand(channels))
        bn.weight.copy_(1.0 + 0.1 * torch.randn(channels))
        bn.bias.copy_(0.1 * torch.randn(channels))
    return bn.eval()


class Model(nn.Module):
    """y = relu6(bn2(pw(relu6(bn1(dw(x)))))), dw a per-channel 3x3 conv, pw a 1x1 conv mixing channels.

    Batch norms always use running statistics (training=False in forward), whatever the module's mode.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.dw = nn.Conv2d(in_channels, in_channels, kernel_size=3, padding=1, groups=in_channels, bias=False)
        self.bn1 = _inference_bn(in_channels)
        self.pw = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False)
        self.bn2 = _inference_bn(out_channels)

    @staticmethod
    def _bn(x: torch.Tensor, bn: nn.BatchNorm2d) -> torch.Tensor:
        return F.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False, eps=bn.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(self._bn(self.dw(x), self.bn1))
        return F.relu6(self._bn(self.pw(x), self.bn2))


batch_size = 16  # gpu size: 98 MiB in, 196 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
in_channels = 128
out_channels = 256
height = 112
width = 112

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 4, "in_channels": 64, "out_channels": 128, "height": 32, "width": 32}


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
