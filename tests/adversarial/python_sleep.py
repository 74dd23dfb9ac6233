"""Attack: hang in Python. forward sleeps for an hour.

Defence: static `forbidden_import` (time); the run stage's wall-clock timeout.
Expected: rejected, static:forbidden_import; static off: timeout, score 0.
"""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        time.sleep(3600)
        return torch.relu(x)
