"""Attack: precompute outputs from a guessed seed. At import: `torch.manual_seed(42)` (KernelBench's
default seed), the task's `get_inputs()` draw replayed, the answer computed once; forward returns a copy.

Defence: the parent draws fresh, unpredictable seeds for every evaluation (and for init).
Expected: rejected, static:no_custom_kernel; with static checks off (so the seed defence is judged alone):
the feedback names the mismatch, score 0 (no kernel ran either, so the status is rejected).
"""
import torch
import torch.nn as nn

torch.manual_seed(42)
guessed_input = torch.randn(64, 1024)
guessed_output = torch.relu(guessed_input)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return guessed_output.clone()
