"""Batched matrix multiplication C[i] = A[i] @ B[i]."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies a batch of (M, K) matrices by a batch of (K, N) matrices."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


batch_size = 64  # gpu size: 256 MiB in, 64 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
m = 512
k = 1024
n = 512

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 16, "m": 128, "k": 256, "n": 128}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 3, "m": 37, "k": 67, "n": 29}]


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []
