"""LayerNorm over the features, then a Linear layer (pre-norm projection)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = LayerNorm(x) @ W^T + b."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.norm = nn.LayerNorm(in_features)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(in_features))
            self.norm.bias.copy_(0.1 * torch.randn(in_features))
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x))


batch_size = 16384  # gpu size: 2*16384*2048*4096 = 275 GFLOP
in_features = 2048
out_features = 4096

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_size": 256, "in_features": 512, "out_features": 1024}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37}]


def get_inputs():
    return [3.0 * torch.randn(batch_size, in_features) + 0.5]


def get_init_inputs():
    return [in_features, out_features]
