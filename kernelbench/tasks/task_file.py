"""Reading one problem file without running it: what it declares, and the `Task` it becomes.

Every path from a file to a task goes through here: the loaders (`builtin`, a KernelBench checkout, a
dataset's rows) inspect their sources with `inspect_source`, and a file the user names (`kernel-agent
eval --task FILE`, `kernel-agent optimize FILE`) becomes a task through `read_task_file`. A file is parsed
with `ast` only; executing it happens in `kernelbench.tasks.problem.load_problem`.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from kernelbench.tasks.task import Task

OP_POLICIES = ("strict", "partial")
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class TaskFileError(ValueError):
    """A problem file that cannot become a task (unreadable, not Python, or not KernelBench's shape); the
    message names the file and what is wrong."""


@dataclass(frozen=True)
class SourceFacts:
    """What a problem file declares, read with `ast` (never executed)."""

    issue: str
    """Empty when the file looks like a problem; otherwise what is wrong, e.g. `syntax error on line 3: ...`."""
    op_policy: str
    """The module constant `OP_POLICY` when set to a known policy, else empty."""
    keep_state_dict: bool = False
    """The module constant `KEEP_STATE_DICT = True` (a submodule extracted from a user's model, `agent.extract`):
    the harness requires `ModelNew`'s `state_dict` keys and shapes to match `Model`'s and judges it with
    `Model`'s weights loaded (docs/harness.md)."""
    input_configs: int = 1
    """Input configurations (`kernelbench.tasks.input_configs`): 1 plus the entries of a literal `INPUT_CONFIGS`
    list; 0 when `INPUT_CONFIGS` is computed (known only once the file is executed)."""


def _defined_names(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level names bound by def, class, assignment or import (last binding wins)."""
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


def inspect_source(source: str) -> SourceFacts:
    """Check a problem file's shape cheaply: it parses, and defines `Model`, `get_inputs`, `get_init_inputs`."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return SourceFacts(issue=f"syntax error on line {e.lineno}: {e.msg}", op_policy="")
    names = _defined_names(tree)
    missing = [n for n in REQUIRED_NAMES if n not in names]
    issues = [f"missing {', '.join(missing)}"] if missing else []
    op_policy = ""
    node = names.get("OP_POLICY")
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
        if node.value.value in OP_POLICIES:
            op_policy = node.value.value
        else:
            issues.append(f"OP_POLICY must be one of {', '.join(OP_POLICIES)}, got {node.value.value!r}")
    elif node is not None:
        issues.append("OP_POLICY must be a string constant")
    configs, problem = _count_configs(names.get("INPUT_CONFIGS"))
    if problem:
        issues.append(problem)
    node = names.get("KEEP_STATE_DICT")
    keep = isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True
    if node is not None and not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                                 and isinstance(node.value.value, bool)):
        issues.append("KEEP_STATE_DICT must be True or False")
    return SourceFacts(issue="; ".join(issues), op_policy=op_policy, input_configs=configs, keep_state_dict=keep)


def _count_configs(node: ast.AST | None) -> tuple[int, str]:
    """(configurations, issue) from the `INPUT_CONFIGS` binding: a literal list of dict literals is counted
    and checked for shape; anything else computed is left to `load_problem`, which executes it."""
    if node is None:
        return 1, ""
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, (ast.List, ast.Tuple)):
        if not all(isinstance(e, ast.Dict) and e.keys for e in value.elts):
            return 1 + len(value.elts), "INPUT_CONFIGS must be a list of non-empty dicts of module constants"
        return 1 + len(value.elts), ""
    if isinstance(value, (ast.Constant, ast.Dict, ast.Set)):
        return 1, "INPUT_CONFIGS must be a list of non-empty dicts of module constants"
    return 0, ""


def read_task_file(path: str, *, origin: str = "file", level: int = 1, op_policy: str = "") -> Task:
    """The problem file at `path` as a Task, read and checked, never executed.

    `origin` names who asked (`file` for `kernel-agent eval`, `user` for `optimize`): the task's id is
    `file:STEM` or `user/STEM`, its origin `ORIGIN:PATH`. `op_policy` overrides the file's `OP_POLICY`
    (default `strict`). Raises TaskFileError when the file cannot be read, does not parse, lacks one of
    `Model`, `get_inputs`, `get_init_inputs`, or declares a bad op policy."""
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskFileError(f"cannot read task file {path}: {getattr(e, 'strerror', None) or e}") from None
    facts = inspect_source(source)
    if facts.issue:
        hint = f" (a KernelBench module defines {', '.join(REQUIRED_NAMES)})" if "missing" in facts.issue else ""
        raise TaskFileError(f"{path}: {facts.issue}{hint}")
    policy = op_policy or facts.op_policy or "strict"
    if policy not in OP_POLICIES:
        raise TaskFileError(f"op policy must be strict or partial, got {policy!r}")
    stem = os.path.splitext(os.path.basename(path))[0]
    task_id = f"user/{stem}" if origin == "user" else f"{origin}:{stem}"
    return Task(id=task_id, level=level, name=stem, origin=f"{origin}:{os.path.abspath(path)}", source=source,
                path=os.path.abspath(path), op_policy=policy)
