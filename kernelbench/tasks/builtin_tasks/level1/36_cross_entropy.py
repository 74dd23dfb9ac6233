"""Cross-entropy loss of logits against integer class targets, averaged over the batch."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """mean over rows of logsumexp(logits) - logits[target]."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


batch_size = 4096  # gpu size: 128 MiB in, 0 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
num_classes = 8192

# cpu size: the loader overrides the constants above with these for CPU runs.
CPU_SIZE = {"batch_size": 256, "num_classes": 4096}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_size": 37, "num_classes": 1000}]


def get_inputs():
    # logits scaled so that a logsumexp without the max subtraction overflows
    return [torch.randn(batch_size, num_classes) * 20.0, torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
