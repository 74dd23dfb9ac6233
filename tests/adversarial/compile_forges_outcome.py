"""Attack: fake the compile stage's outcome. The kernel does not compile (it calls a function that does not
exist). At import, in the compile child, the candidate registers an `atexit` handler that writes the compile
child's result file (`result.json` in its scratch folder, the child's working directory) claiming success,
then wraps the build error in an exception whose message cannot be read: the harness's own reporting of it
raised in turn, the child left through the interpreter's normal exit, and the handler ran. When the parent
read `result.json` after the child exited (it carried no nonce), the failed build was recorded as compiled
(`compiled: true`) and its import outcome cached as `ok`, so every later evaluation of the same file skipped
the compile and never showed the error. A C++ static destructor of a library the import loaded runs at the
same moment and could do the same.

Defence: the compile child sends its outcome over the parent's pipe with the job's nonce and ends with
`os._exit` on every path, an unreadable exception included (no `atexit` handler, no static destructor runs);
the parent kills the sandbox before it parses the pipe and reads no file from the child's scratch folder
(`kernelbench.harness.build.builder._compile`).
Expected: rejected, static:forbidden_import or static:try_except; static off: compile_error, not compiled,
the cached import outcome `compile_error`, score 0.
"""
import atexit
import json

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) { return no_such_function(x); }
"""


def claim_success():
    try:
        with open("result.json") as f:
            result = json.load(f)
    except (OSError, ValueError):
        result = {}
    result.update(ok=True, phase="done")
    result.pop("error", None)
    with open("result.json", "w") as f:
        json.dump(result, f)


class Unreadable(Exception):
    def __str__(self):
        raise Unreadable()


atexit.register(claim_success)
try:
    ext = load_inline(name="adv_compile_forge", cpp_sources=[cpp_source], functions=["relu"], extra_cflags=["-O3"])
except Exception:
    raise Unreadable()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu(x)
