"""A local KernelBench checkout: `KernelBench/level{1..4}/<id>_<Name>.py`, ids `kb:L{level}/<id>_<Name>`.

PATH may be the repository root or its `KernelBench/` folder. Nothing is downloaded and nothing is
executed here. Level-4 problems build Hugging Face models (`from_pretrained`), so they are listed
with `needs_weights=True` and refused at load time (KernelBench, arXiv 2502.10517).
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelbench.tasks.task import OriginError, Task
from kernelbench.tasks.task_file import inspect_source

LEVELS = (1, 2, 3, 4)
WEIGHTS_LEVEL = 4
FILE_NAME = re.compile(r"^(\d+)_.*\.py$")


def problems_root(path: str | Path) -> Path:
    """The folder that holds `level1/`..`level4/`: PATH itself or PATH/KernelBench."""
    path = Path(path).expanduser()
    if not path.exists():
        raise OriginError(f"kernelbench:{path}: no such directory")
    for candidate in (path, path / "KernelBench"):
        if any((candidate / f"level{lvl}").is_dir() for lvl in LEVELS):
            return candidate
    raise OriginError(f"kernelbench:{path}: no level1..level4 folders here or in {path / 'KernelBench'}")


def load_kernelbench_repo(path: str | Path) -> list[Task]:
    """Every problem of a checkout, by level then problem number."""
    root = problems_root(path)
    origin = f"kernelbench:{path}"
    found = []
    for level in LEVELS:
        folder = root / f"level{level}"
        if not folder.is_dir():
            continue
        for file in folder.iterdir():
            match = FILE_NAME.match(file.name)
            if match and file.is_file():
                found.append((level, int(match.group(1)), file))
    found.sort(key=lambda item: (item[0], item[1], item[2].name))
    tasks = []
    for level, _, file in found:
        source = file.read_text(encoding="utf-8", errors="replace")
        tasks.append(Task(
            id=f"kb:L{level}/{file.stem}",
            level=level,
            name=file.stem,
            origin=origin,
            source=source,
            path=str(file),
            needs_weights=level == WEIGHTS_LEVEL,
            op_policy=inspect_source(source).op_policy or "strict",
        ))
    return tasks
