"""KernelBench-format tasks and the sandboxed evaluation harness.

This package never imports model or training code. GPU-only libraries (cupy, cuda-bindings) are
imported lazily inside the functions that need them, so a CPU user never pays for or trips on them.
"""

from kernelbench.tasks.task import Task, TaskFormatError

__all__ = ["Task", "TaskFormatError"]
