"""Batch normalization of an NCHW tensor in inference mode (running statistics, no update)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Normalises each channel with stored running mean/variance, then scales and shifts.

    The statistics and affine parameters are random (not the 0/1 defaults) so each one matters.
    """

    def __init__(self, num_features: int):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(num_features))
        self.bias = nn.Parameter(0.1 * torch.randn(num_features))
        self.register_buffer("running_mean", 0.1 * torch.randn(num_features))
        self.register_buffer("running_var", 0.5 + torch.rand(num_features))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=False, eps=self.eps)


batch_size = 4  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
num_features = 64
height = 512
width = 512

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 8, "num_features": 32, "height": 128, "width": 128}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "height": 37, "width": 29}]


def get_inputs():
    return [torch.randn(batch_size, num_features, height, width)]


def get_init_inputs():
    return [num_features]
