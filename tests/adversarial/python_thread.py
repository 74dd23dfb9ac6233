"""Attack: a background Python thread does the work and stays alive after forward returns (work outside
the timed window, more cores than the reference gets).

Defence: static `threads_or_processes` (import of threading); the run child refuses every new thread after
`__init__` (kernelbench.harness.child.spawn_guard.refuse_new_tasks), and counts its threads after each phase (`dynamic:threads`,
for threads started earlier).
Expected: rejected, static:threads_or_processes; static off: runtime_error ("can't start new thread").
"""
import threading

import torch
import torch.nn as nn


def worker(x, out, done):
    out.copy_(torch.relu(x))
    done.set()
    threading.Event().wait(120.0)  # linger


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        done = threading.Event()
        threading.Thread(target=worker, args=(x, out, done), daemon=True).start()
        done.wait()
        return out
