"""Product of two input matrices followed by softmax over each row."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = softmax(a @ b, dim=-1); both operands are inputs, there are no parameters."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.softmax(a @ b, dim=-1)


m = 4096            # gpu size: 2*4096*2048*8192 = 137 GFLOP
k = 2048
n = 8192

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"m": 128, "k": 512, "n": 2048}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"m": 37, "k": 93, "n": 301}]


def get_inputs():
    # Logits of standard deviation ~4: a few entries per row carry most of the mass, so outputs are not
    # all ~1/n (which a near-zero result could match within an absolute tolerance).
    return [torch.randn(m, k) * (4.0 / k ** 0.5), torch.randn(k, n)]


def get_init_inputs():
    return []
