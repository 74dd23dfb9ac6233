"""How the parent starts a child: the command line of `kernelbench.harness.child.worker`. Apart from the worker
so that the parent's modules that start children (`builds`, `children`) import nothing of the child's code."""

from __future__ import annotations

import os
import sys

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


CHILD_PYTHON_ENV = "KERNEL_AGENT_CHILD_PYTHON"
"""Test hook: the interpreter the children run instead of this one. Only tests set it, to break the harness
on purpose (an interpreter the sandbox's user cannot execute) and check that it is reported as such."""


def child_argv(scratch: str, prebuild: bool = False) -> tuple[str, ...]:
    """`python -I` (no PYTHON* variables, no user site, no cwd on sys.path) with this project importable
    whether or not it is installed. `prebuild` (the compile child): first start the early build the parent
    may have planned (`kernelbench.harness.child.prebuild`, before anything imports torch)."""
    early = f"from kernelbench.harness.child import prebuild; prebuild.start({scratch!r}); " if prebuild else ""
    boot = (f"import sys; sys.path.insert(0, {PROJECT_ROOT!r}); {early}from kernelbench.harness.child.worker import main; "
            f"sys.exit(main(['worker', {scratch!r}]))")
    return (os.environ.get(CHILD_PYTHON_ENV) or sys.executable, "-I", "-c", boot)
