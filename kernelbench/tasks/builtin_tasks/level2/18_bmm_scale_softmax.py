"""Attention scores: batched q @ k^T, scaling, then softmax over the keys."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = softmax(q @ k^T * scale, -1) for q, k of shape (batch*heads, seq_len, head_dim)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.bmm(q, k.transpose(1, 2)) * self.scale, dim=-1)


batch_heads = 16  # gpu size: 16 MiB in, 256 MiB out per input set (at most 256 MiB each: docs/tasks.md, "Sizes")
seq_len = 2048
head_dim = 64
scale = 0.5         # 4/sqrt(head_dim): logits of std ~4, so that rows are not all near 1/seq_len

# cpu size: overrides the constants above for CPU runs
CPU_SIZE = {"batch_heads": 8, "seq_len": 256}

# another input configuration: correctness is also checked with these constants overridden (timing
# uses the sizes above); odd sizes, so a kernel tied to the timed shape or to whole blocks fails.
INPUT_CONFIGS = [{"batch_heads": 3, "seq_len": 77, "head_dim": 40}]


def get_inputs():
    return [torch.randn(batch_heads, seq_len, head_dim), torch.randn(batch_heads, seq_len, head_dim)]


def get_init_inputs():
    return [scale]
