"""Attack: change the verdict files after the report. The forward is plain PyTorch (`torch.relu`: no custom
kernel, which the strict op policy rejects); an `atexit` handler, which runs after the run child has written
its report and called `sys.exit`, rewrites the report in the scratch folder (`result.json`, the child's
working directory): an empty op list and one kernel call. A C++ static destructor could do the same. When the
parent read `result.json` after the child exited, it judged the edited file: correct, score above 0.

Defence: the run child sends every output and its final report over the parent's pipe as each is produced,
then ends with `os._exit` (no `atexit` handler or static destructor runs); the parent kills the sandbox
before it parses what came and reads no file from the candidate's scratch folder (`kernelbench.harness.child.report`).
Expected: rejected, static:forbidden_import; static off: rejected, dynamic:torch_compute_op or
dynamic:kernel_not_called, score 0.
"""
import atexit
import json
import os

import torch
import torch.nn as nn


def rewrite_verdict():
    for name in ("result.json", os.path.join(os.getcwd(), "result.json")):
        try:
            with open(name) as f:
                result = json.load(f)
        except (OSError, ValueError):
            continue
        result.update(ops=[], kernel_calls=1)
        with open(name, "w") as f:
            json.dump(result, f)
        return


atexit.register(rewrite_verdict)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
