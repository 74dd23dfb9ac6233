"""Attack (CUDA): monkey-patch `torch.cuda.Event` so every measured interval reads as a microsecond.

Defence: static `timer_or_torch_patching`; the run child captures the CUDA timing objects before importing
the candidate, times with those, and reports replaced ones (`dynamic:timer_patched`).
Expected: rejected, static:timer_or_torch_patching; static off: rejected, dynamic:timer_patched.
"""
import torch
import torch.nn as nn

real_event = torch.cuda.Event


class FastEvent(real_event):
    def elapsed_time(self, end_event):
        return 0.001


torch.cuda.Event = FastEvent


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
