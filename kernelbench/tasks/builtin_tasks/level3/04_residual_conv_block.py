"""ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, identity skip, ReLU (BatchNorm in inference mode)."""
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
    """y = relu(x + bn2(conv2(relu(bn1(conv1(x)))))).

    Batch norms always use running statistics (training=False in forward), whatever the module's mode.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn1 = _inference_bn(channels)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn2 = _inference_bn(channels)

    @staticmethod
    def _bn(x: torch.Tensor, bn: nn.BatchNorm2d) -> torch.Tensor:
        return F.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False, eps=bn.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self._bn(self.conv1(x), self.bn1))
        y = self._bn(self.conv2(y), self.bn2)
        return torch.relu(x + y)


batch_size = 32     # gpu size: 2 convs * 2*32*64*128*128*64*9 = 77 GFLOP
channels = 64
height = 128
width = 128

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 4, "channels": 32, "height": 32, "width": 32}


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
