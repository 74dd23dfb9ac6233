"""Linear layer, row minimum, then subtraction of that minimum from every output."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """z = x @ W^T + b; y = z - min(z, dim=1) (each row shifted so that its smallest entry is 0)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.linear(x)
        return z - z.min(dim=1, keepdim=True).values


batch_size = 4096   # gpu size: 2*4096*8192*4096 = 275 GFLOP
in_features = 8192
out_features = 4096

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 128, "in_features": 2048, "out_features": 512}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
