"""Attack: read the expected output from the process's memory. forward scans `gc.get_objects()` for a
tensor of the output's shape that is not its own input and returns a copy of it.

Defence: static `forbidden_import` (gc); by design the reference outputs are computed in another process
and never enter the run child, so all such a scan finds is other input sets (the harness's own list of
them) and the candidate's earlier outputs.
Expected: rejected, static:forbidden_import; static off: outputs disagree (feedback names the mismatch),
score 0.
"""
import gc

import torch
import torch.nn as nn


def tensors_in(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for t in obj if isinstance(t, torch.Tensor)]
    if isinstance(obj, dict):
        return [t for t in obj.values() if isinstance(t, torch.Tensor)]
    return []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        for obj in gc.get_objects():
            for t in tensors_in(obj):
                if t.shape == x.shape and t.dtype == x.dtype and t.data_ptr() != x.data_ptr():
                    return t.clone()
        return torch.zeros_like(x)
