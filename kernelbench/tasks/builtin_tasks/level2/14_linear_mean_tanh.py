"""Linear layer, mean over the output features, then tanh."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = tanh(gain * mean(x @ W^T + b, dim=1, keepdim=True)); output is (batch, 1).

    The mean of n outputs of a randomly initialised Linear has spread ~1/sqrt(3n); gain = sqrt(n) brings
    it to ~0.6 so that the output is not near zero everywhere (which a zero result would match).
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.gain = out_features ** 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.gain * self.linear(x).mean(dim=1, keepdim=True))


batch_size = 8192   # gpu size: 2*8192*4096*4096 = 275 GFLOP
in_features = 4096
out_features = 4096

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 128, "in_features": 1024, "out_features": 1024}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
