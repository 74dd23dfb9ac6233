"""The built-in suite: `kernelbench/tasks/builtin_tasks/level{1,2,3}/NN_snake_name.py`, ids `L{level}/NN_snake_name`.

The files are KernelBench-format problems written for this project, sized for a GPU by their module
constants and for a CPU by their `CPU_SIZE` dict. Listing reads each file's text and its `OP_POLICY`
constant with `ast`; nothing is executed. Level-3 files set `OP_POLICY = "partial"`; a file without
the constant gets `strict`, the default for training and benchmarks (Kevin-32B, arXiv 2507.11948).
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelbench.tasks.task import Task
from kernelbench.tasks.task_file import inspect_source

BUILTIN_ROOT = Path(__file__).resolve().parent / "builtin_tasks"
LEVELS = (1, 2, 3)
FILE_NAME = re.compile(r"^(\d+)_\w+\.py$")


def task_files(root: Path) -> list[tuple[int, Path]]:
    """(level, path) of every problem file under `root`, by level then problem number."""
    found = []
    for level in LEVELS:
        folder = root / f"level{level}"
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            match = FILE_NAME.match(path.name)
            if match and path.is_file():
                found.append((level, int(match.group(1)), path))
    found.sort(key=lambda item: (item[0], item[1], item[2].name))
    return [(level, path) for level, _, path in found]


def load_builtin(root: str | Path | None = None) -> list[Task]:
    """Tasks of the built-in suite (or of a folder laid out the same way, for tests)."""
    root = Path(root) if root is not None else BUILTIN_ROOT
    tasks = []
    for level, path in task_files(root):
        source = path.read_text(encoding="utf-8")
        facts = inspect_source(source)
        tasks.append(Task(
            id=f"L{level}/{path.stem}",
            level=level,
            name=path.stem,
            origin="builtin",
            source=source,
            path=str(path),
            op_policy=facts.op_policy or "strict",
        ))
    return tasks
