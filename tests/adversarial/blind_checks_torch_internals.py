"""Attack: blind the instrumentation without importing anything forbidden. `TorchDispatchMode.__enter__` /
`__exit__` are patched so the op tracer is never pushed, and the kernel-call counter is replaced through
the `__globals__` of the counting wrapper the harness put on `load_inline`. Forward is plain PyTorch.

Defence: static `dynamic_code` (dunder access) and private-import rules; with static checks off, the dynamic
checks must not trust in-process instrumentation the candidate can rewrite.
Expected: rejected, static:dynamic_code; static off: rejected with a dynamic flag, score 0.
"""
import torch
import torch.nn as nn
from torch.utils import _python_dispatch
from torch.utils.cpp_extension import load_inline


def enter_nothing(self):
    return self


def exit_nothing(self, *args):
    return None


def one_call():
    return 1


_python_dispatch.TorchDispatchMode.__enter__ = enter_nothing
_python_dispatch.TorchDispatchMode.__exit__ = exit_nothing
counter_globals = getattr(load_inline, "__globals__", {})
if "count" in counter_globals:
    counter_globals["count"] = one_call


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
