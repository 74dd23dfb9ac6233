"""Attack: `os._exit(0)` at import, hoping that a clean exit status reads as success.

Defence: static `forbidden_import` (os); the compile child must send its outcome over the parent's pipe
carrying the job's nonce, so an exit without one is a failure whatever the exit status.
Expected: rejected, static:forbidden_import; static off: compile_error, score 0.
"""
import os

import torch
import torch.nn as nn

os._exit(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
