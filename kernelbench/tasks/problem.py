"""Executing a problem file: a fresh module namespace exposing `Model`, `get_inputs`, `get_init_inputs`.

Listing tasks never comes here; only evaluation (and `tasks show`) does. Problem files are KernelBench's
format. The built-in suite adds one optional name, `CPU_SIZE`, a dict of module-level size constants to
override for the `cpu` size: `get_inputs()` reads those globals when called, so the file stays a valid
KernelBench problem at its `gpu` size. KernelBench's own problems get the same kind of dict from
`kernelbench/tasks/kernelbench_cpu_sizes.json` (kernelbench/tasks/cpu_size_records.py) when they define none.
KernelBench problem at its `gpu` size. A second optional name, `INPUT_CONFIGS`, lists more input
configurations to check correctness at (`kernelbench.tasks.input_configs`).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable

from kernelbench.tasks import cpu_size_records
from kernelbench.tasks.input_configs import InputConfig, read_configs
from kernelbench.tasks.task import Task, TaskFormatError

SIZES = ("cpu", "gpu")
REQUIRED = ("Model", "get_inputs", "get_init_inputs")


@dataclass(frozen=True)
class Problem:
    """A loaded problem: the three KernelBench names plus the namespace they live in."""

    task: Task
    size: str
    module: types.ModuleType
    Model: type
    get_inputs: Callable[[], list[Any]]
    get_init_inputs: Callable[[], list[Any]]
    configs: tuple[InputConfig, ...] = ()
    """Input configurations (`kernelbench.tasks.input_configs`), the timed one first: the file's own
    constants at this size, then one per `INPUT_CONFIGS` entry."""


def exec_source(source: str, filename: str, module_name: str = "kernelbench_problem") -> types.ModuleType:
    """Run `source` as a new module; a syntax or top-level error becomes a TaskFormatError naming the file."""
    module = types.ModuleType(module_name)
    module.__file__ = filename
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as e:
        raise TaskFormatError(f"{filename}: syntax error on line {e.lineno}: {e.msg}") from None
    try:
        exec(code, module.__dict__)
    except Exception as e:  # a problem file that fails at import is malformed, whatever the exception
        raise TaskFormatError(f"{filename}: executing the problem failed: {type(e).__name__}: {e}") from None
    return module


def load_problem(task: Task, size: str = "cpu") -> Problem:
    """Execute `task.source` and check it defines what a KernelBench problem must define."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    filename = task.path or f"<{task.id}>"
    if task.needs_weights:
        raise TaskFormatError(f"{filename}: level-4 problem needs Hugging Face model weights, which are not loaded here")
    module = exec_source(task.source, filename)
    missing = [n for n in REQUIRED if not hasattr(module, n)]
    if missing:
        raise TaskFormatError(f"{filename}: missing {', '.join(missing)} (a problem defines {', '.join(REQUIRED)})")
    if not isinstance(module.Model, type):
        raise TaskFormatError(f"{filename}: Model is not a class")
    for n in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, n)):
            raise TaskFormatError(f"{filename}: {n} is not a function")
    if size == "cpu":
        overrides = getattr(module, "CPU_SIZE", None)
        if overrides is None:  # KernelBench's own problems: the size derived for them, when one was recorded
            overrides = cpu_size_records.recorded_overrides(task)
        if not isinstance(overrides, dict):
            raise TaskFormatError(f"{filename}: CPU_SIZE must be a dict of module constants")
        unknown = [k for k in overrides if not hasattr(module, k)]
        if unknown:
            raise TaskFormatError(f"{filename}: CPU_SIZE overrides names the module does not define: {', '.join(unknown)}")
        cpu_size_records.apply_overrides(module, overrides)
    configs = read_configs(module, filename)  # after CPU_SIZE: a configuration overrides the chosen size
    return Problem(task=task, size=size, module=module, Model=module.Model,
                   get_inputs=module.get_inputs, get_init_inputs=module.get_init_inputs, configs=configs)
