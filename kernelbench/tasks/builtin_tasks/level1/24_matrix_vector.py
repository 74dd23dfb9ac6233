"""Matrix-vector product y = A @ x with x given as a (K, 1) column."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies an (M, K) matrix by a (K, 1) column vector; memory-bound on A."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, x)


m = 1024  # gpu size: 128 MiB in, 0 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
k = 32768

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"m": 4096, "k": 2048}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"m": 301, "k": 333}]


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, 1)]


def get_init_inputs():
    return []
