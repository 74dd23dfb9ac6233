"""HardTanh: clamp to [min_val, max_val], applied elementwise."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Clamps x to [min_val, max_val]."""

    def __init__(self, min_val: float, max_val: float):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(x, min_val=self.min_val, max_val=self.max_val)


batch_size = 2048  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
dim = 32768
min_val = -1.0
max_val = 1.0

# cpu size: the loader overrides the constants above with these for CPU runs (a few ms on one core).
CPU_SIZE = {"batch_size": 1024, "dim": 4096}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37, "dim": 1531}]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [min_val, max_val]
