"""Matrix times a scalar: C = A * s, with s fixed at construction."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales every element of A by the constant s."""

    def __init__(self, s: float):
        super().__init__()
        self.s = s

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a * self.s


m = 2048  # gpu size: 256 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
n = 32768
s = 3.25

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"m": 1024, "n": 4096}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"m": 37, "n": 1531}]


def get_inputs():
    return [torch.randn(m, n)]


def get_init_inputs():
    return [s]
