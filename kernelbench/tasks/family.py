"""Templated task families: many small problems generated from one template, some held out.

`affine` (origin `family:affine`, ids `affine/00` ... `affine/29`): `y = x * a + b` on an (m, n) float32
matrix, the constants and the shape differing from task to task. What the agent is shown (`Task.prompt_source`)
leaves out one thing the harness does use: the input's memory layout. Half the tasks hand `forward` a
row-major matrix, half a column-major one (a transposed view), assigned by a seeded shuffle that looks at
nothing the prompt shows, so the prompt cannot reveal it and only a measurement can. Every task has the same
three answers (files in `family_affine/`, one build each, shared by every task):
- `rows` (the family's `cpu` answer): reads row by row through the strides into a row-major output; fast on a
  row-major input, its reads a column apart on a column-major one.
- `columns`: the mirror image, fast on a column-major input and strided on a row-major one.
- `crossed` (`cpu_slow`): reads row by row into a column-major output, so its writes are strided on every
  task: slower than `rows` whatever the layout.
So `rows` is the first answer to give when the layout is unknown, and its measured speedup tells which
layout the task has: the right second answer keeps `rows` after a fast verdict and switches to `columns`
after a slow one. Tasks 24-29 are held out (3 of each layout); 0-23 train (12 of each).
"""

from __future__ import annotations

import random
from pathlib import Path

from kernelbench.tasks.task import OriginError, Task

FAMILY_ROOT = Path(__file__).resolve().parent
FAMILIES = ("affine",)
AFFINE_TASKS = 30
AFFINE_HELDOUT = range(24, 30)
ANSWER_FILES = {"rows": "rows.py", "columns": "columns.py", "crossed": "crossed.py"}
SOLUTION_KIND_ANSWER = {"cpu": "rows", "cpu_slow": "crossed"}
"""The family's answers under the `solutions` kinds: `cpu` the fast first answer, `cpu_slow` the slow one."""

_TEMPLATE = '''"""Scale and shift: y = x * a + b elementwise, with a and b fixed at construction."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, a: float, b: float):
        super().__init__()
        self.a = a
        self.b = b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.a + self.b


m = {m}
n = {n}
a = {a}
b = {b}


def get_inputs():
    # x: an (m, n) float32 matrix of standard normal samples; its memory layout is not shown.
{inputs}


def get_init_inputs():
    return [a, b]
'''
_SHOWN_INPUTS = "    ..."
_INPUTS = {"row": "    return [torch.randn(m, n)]", "column": "    return [torch.randn(n, m).t()]"}


def _affine_layouts() -> list[str]:
    """Layout of each task: balanced within the training and within the held-out tasks, shuffled by a fixed
    seed that sees nothing but the task's position."""
    rng = random.Random("affine-layouts-1")
    out = []
    for count in (AFFINE_HELDOUT.start, AFFINE_TASKS - AFFINE_HELDOUT.start):
        part = ["row", "column"] * (count // 2)
        rng.shuffle(part)
        out += part
    return out


def _affine_constants(i: int) -> dict[str, object]:
    rng = random.Random(f"affine-constants-{i}")
    return {"m": rng.choice((768, 1024, 1280, 1536)), "n": rng.choice((1536, 2048, 2560, 3072)),
            "a": round(rng.uniform(0.25, 3.0), 2), "b": round(rng.uniform(-2.0, 2.0), 2)}


def affine_layout(task_id: str) -> str:
    """`row` or `column`: the hidden layout of an `affine` task's input."""
    return _affine_layouts()[_index(task_id)]


def _index(task_id: str) -> int:
    name = task_id.split(":", 1)[-1]
    if not name.startswith("affine/") or not name[7:].isdigit() or not 0 <= int(name[7:]) < AFFINE_TASKS:
        raise OriginError(f"no task {task_id!r} in family:affine (ids affine/00 .. affine/{AFFINE_TASKS - 1:02d})")
    return int(name[7:])


def load_family(name: str) -> list[Task]:
    """Every task of family `name`, in order."""
    if name != "affine":
        raise OriginError(f"unknown task family {name!r}: one of {', '.join(FAMILIES)}")
    tasks = []
    for i, layout in enumerate(_affine_layouts()):
        c = _affine_constants(i)
        tasks.append(Task(id=f"affine/{i:02d}", level=1, name=f"affine_{i:02d}", origin="family:affine",
                          source=_TEMPLATE.format(inputs=_INPUTS[layout], **c),
                          prompt_source=_TEMPLATE.format(inputs=_SHOWN_INPUTS, **c)))
    return tasks


def family_of_id(task_id: str) -> str:
    """The family origin an id belongs to (`family:affine`), or empty."""
    return "family:affine" if task_id.split(":", 1)[-1].startswith("affine/") else ""


def split_of(task: Task) -> str:
    """`heldout` or `train`: a family holds its last tasks out (AFFINE_HELDOUT)."""
    return "heldout" if _index(task.id) in AFFINE_HELDOUT else "train"


def answer_source(name: str) -> str:
    """The text of one of the family's answers (`rows`, `columns`, `crossed`)."""
    return (FAMILY_ROOT / "family_affine" / ANSWER_FILES[name]).read_text(encoding="utf-8")


def answer_path(name: str) -> str:
    return str(FAMILY_ROOT / "family_affine" / ANSWER_FILES[name])
