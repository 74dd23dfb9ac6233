"""The task catalog: resolve an origin string to its tasks, find a task by id, read a file without running it.

Origins:
- `builtin`: the suite under `kernelbench/tasks/builtin_tasks/level{1,2,3}/` (ids `L1/03_gelu`).
- `kernelbench:PATH`: a local KernelBench checkout, its root or its `KernelBench/` folder (ids `kb:L1/19_ReLU`).
- `hf:NAME`: the Hugging Face dataset `NAME` (from the local cache when offline), or `hf:PATH` to local
  parquet / json / csv data files or a folder of them (ids `hf:L1/19_ReLU`).

Listing never executes a problem: a file is parsed with `ast` only, so a syntax error or a missing
`Model` shows up as an issue string beside the task instead of stopping the listing. Executing happens
in `kernelbench.tasks.problem.load_problem`, which raises a `TaskFormatError` naming the file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelbench.tasks.task import Task

DEFAULT_HF_DATASET = "ScalingIntelligence/KernelBench"
OP_POLICIES = ("strict", "partial")
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class OriginError(ValueError):
    """An origin string that names nothing loadable; the message says which and why."""


@dataclass(frozen=True)
class SourceFacts:
    """What a problem file declares, read with `ast` (never executed)."""

    issue: str
    """Empty when the file looks like a problem; otherwise what is wrong, e.g. `syntax error on line 3: ...`."""
    op_policy: str
    """The module constant `OP_POLICY` when set to a known policy, else empty."""
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
    return SourceFacts(issue="; ".join(issues), op_policy=op_policy, input_configs=configs)


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


def load_tasks(origin: str) -> list[Task]:
    """All tasks of one origin, sorted by level and problem number."""
    if origin == "builtin":
        from kernelbench.tasks.builtin import load_builtin

        return load_builtin()
    if origin.startswith("kernelbench:"):
        from kernelbench.tasks.kernelbench_repo import load_kernelbench_repo

        path = origin.split(":", 1)[1]
        if not path:
            raise OriginError("kernelbench: needs a path, e.g. kernelbench:/data/KernelBench")
        return load_kernelbench_repo(path)
    if origin.startswith("hf:"):
        from kernelbench.tasks.hf_dataset import load_hf_dataset

        name = origin.split(":", 1)[1]
        if not name:
            raise OriginError(f"hf: needs a dataset name or a local data path, e.g. hf:{DEFAULT_HF_DATASET}")
        return load_hf_dataset(name)
    raise OriginError(f"unknown task source {origin!r}: use builtin, kernelbench:PATH or hf:NAME")


def origin_for_id(task_id: str, origin: str | None) -> str:
    """The origin to look `task_id` up in: the one given, else the one its prefix implies."""
    if origin:
        return origin
    if task_id.startswith("kb:"):
        raise OriginError(f"{task_id} is a KernelBench checkout task: pass --source kernelbench:PATH")
    if task_id.startswith("hf:"):
        return f"hf:{DEFAULT_HF_DATASET}"
    return "builtin"


def find_task(task_id: str, origin: str | None = None) -> Task:
    """The task with `task_id` (the origin's prefix may be left off: `L1/19_ReLU` finds `kb:L1/19_ReLU`)."""
    origin = origin_for_id(task_id, origin)
    tasks = load_tasks(origin)
    for task in tasks:
        if task.id == task_id or task.id.split(":", 1)[-1] == task_id:
            return task
    raise OriginError(f"no task {task_id!r} in {origin} ({len(tasks)} tasks; see `kernel-agent tasks list`)")
