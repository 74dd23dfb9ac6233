"""Rectangular matrix multiplication C = A @ B with a tall A and a short inner dimension."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies an (M, K) matrix by a (K, N) matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


m = 16384  # gpu size: 2 * M * K * N = 137 GFLOP (~2.7 ms at ~50 TFLOP/s fp32, TF32 off)
k = 1024
n = 4096

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"m": 2048, "k": 128, "n": 512}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"m": 133, "k": 67, "n": 91}]


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
