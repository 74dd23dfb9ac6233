"""Linear layer followed by logsumexp over the output features."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = logsumexp(x @ W^T + b, dim=1, keepdim=True); output is (batch, 1)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(self.linear(x), dim=1, keepdim=True)


batch_size = 8192   # gpu size: 2*8192*4096*4096 = 275 GFLOP
in_features = 4096
out_features = 4096

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 128, "in_features": 1024, "out_features": 1024}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    # Wide logits (std ~6) so that the result differs from row to row by more than a relative tolerance.
    return [10.0 * torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
