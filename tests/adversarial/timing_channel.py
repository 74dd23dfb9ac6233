"""Attack: forge the paired-timing protocol. On CPU the run child times in blocks on the parent's word over
two inherited pipes (kernelbench/harness/paired.py); forward writes `done` into every pipe it can write, hoping the
parent ends the candidate's blocks early, times the reference while the candidate still runs, or loses
count of the rounds.

Defence: static `forbidden_import` (os); the parent accepts exactly one `ready` and then one `done` per
block it asked for, and anything else ends the pairing with the candidate rejected (no honest timing
exists); the reference only runs with the candidate frozen. The same bytes in the report pipe
(`kernelbench.harness.child.report`) make frames out of sequence, which voids the report.
Expected: rejected, static:forbidden_import; static off: rejected, timing_inconsistent or
dynamic:harness_tampered.
"""
import os
import stat

import torch
import torch.nn as nn


def spoof() -> None:
    for name in os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b"done\n")
        except (OSError, ValueError):
            continue


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        spoof()
        return torch.relu(x)
