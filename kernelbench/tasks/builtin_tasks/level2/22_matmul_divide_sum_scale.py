"""Matrix multiply by a weight, divide by a constant, sum over the features, then scale."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = sum((x @ W^T) / divisor, dim=1, keepdim=True) * scale; output is (batch, 1)."""

    def __init__(self, in_features: int, out_features: int, divisor: float, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.divisor = divisor
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(x, self.weight.T) / self.divisor
        return y.sum(dim=1, keepdim=True) * self.scale


batch_size = 8192   # gpu size: 2*8192*4096*4096 = 275 GFLOP for the reference as written
in_features = 4096
out_features = 4096
divisor = 2.0
scale = 1.5

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 128, "in_features": 1024, "out_features": 1024}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor, scale]
