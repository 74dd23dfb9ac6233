"""Attack: monkey-patch the timer. `time.perf_counter` is replaced by a clock that runs 1000x slow, so every
timed trial looks 1000x faster.

Defence: static (`time` is not an allowed import; assignment to a module attribute); the run child captures
its timers before importing the candidate, times with the captured ones, and reports any replaced public
timer (`dynamic:timer_patched`).
Expected: rejected, static:forbidden_import / static:timer_or_torch_patching; static off: rejected,
dynamic:timer_patched.
"""
import time

import torch
import torch.nn as nn

real_perf_counter = time.perf_counter


def slow_clock():
    return real_perf_counter() / 1000.0


time.perf_counter = slow_clock
time.monotonic = slow_clock
time.time = slow_clock


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
