"""Linear layer followed by swish: y * sigmoid(y)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = z * sigmoid(z) with z = x @ W^T + b, written as the product rather than F.silu."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.linear(x)
        return z * torch.sigmoid(z)


batch_size = 8192   # gpu size: 2*8192*2048*8192 = 275 GFLOP
in_features = 2048
out_features = 8192

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 128, "in_features": 512, "out_features": 2048}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
