"""Small CNN classifier: two conv3x3-ReLU-maxpool stages, then a linear head producing logits."""
import torch
import torch.nn as nn

OP_POLICY = "partial"


class Model(nn.Module):
    """(N, 3, S, S) images -> conv(3->32)-relu-pool -> conv(32->64)-relu-pool -> flatten -> linear -> logits."""

    def __init__(self, num_classes: int, image_size: int):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(kernel_size=2)
        self.head = nn.Linear(64 * (image_size // 4) ** 2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.head(x.flatten(1))


batch_size = 256    # gpu size: convs 7 + 39 GFLOP, head 3.4 GFLOP
image_size = 128
num_classes = 100

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 8, "image_size": 32}


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes, image_size]
