"""Hinge loss mean(max(0, 1 - y * f)) for scores f and labels y in {-1, +1}."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Averages the hinge 1 - labels * scores, clamped below at 0."""

    def __init__(self):
        super().__init__()

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1.0 - labels * scores, min=0.0))


batch_size = 1024  # gpu size: 256 MiB in, 0 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
dim = 32768

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 256, "dim": 4096}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37, "dim": 1531}]


def get_inputs():
    labels = torch.randint(0, 2, (batch_size, dim), dtype=torch.float32) * 2.0 - 1.0
    return [torch.randn(batch_size, dim), labels]


def get_init_inputs():
    return []
