"""ELU with a configurable alpha, applied elementwise."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Applies x if x > 0 else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


batch_size = 2048  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
dim = 32768
alpha = 1.0

# cpu size: the loader overrides the constants above with these for CPU runs (a few ms on one core).
CPU_SIZE = {"batch_size": 256, "dim": 4096}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37, "dim": 1531}]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha]
