"""The task catalog: resolve an origin string to its tasks, find a task by id.

Origins:
- `builtin`: the suite under `kernelbench/tasks/builtin_tasks/level{1,2,3}/` (ids `L1/03_gelu`).
- `kernelbench:PATH`: a local KernelBench checkout, its root or its `KernelBench/` folder (ids `kb:L1/19_ReLU`).
- `family:NAME`: a templated task family (`kernelbench.tasks.family`; ids `affine/07`), with its own held-out tasks.
- `hf:NAME`: the Hugging Face dataset `NAME` (from the local cache when offline), or `hf:PATH` to local
  parquet / json / csv data files or a folder of them (ids `hf:L1/19_ReLU`).

Listing never executes a problem: a file is parsed with `ast` only (`kernelbench.tasks.task_file`), so a
syntax error or a missing `Model` shows up as an issue string beside the task instead of stopping the listing.
Executing happens in `kernelbench.tasks.problem.load_problem`, which raises a `TaskFormatError` naming the file.
"""

from __future__ import annotations

from kernelbench.tasks.builtin import load_builtin
from kernelbench.tasks.family import family_of_id, load_family
from kernelbench.tasks.hf_dataset import load_hf_dataset
from kernelbench.tasks.kernelbench_repo import load_kernelbench_repo
from kernelbench.tasks.task import OriginError, Task

DEFAULT_HF_DATASET = "ScalingIntelligence/KernelBench"


def load_tasks(origin: str) -> list[Task]:
    """All tasks of one origin, sorted by level and problem number."""
    if origin == "builtin":
        return load_builtin()
    if origin.startswith("family:"):
        return load_family(origin.split(":", 1)[1])
    if origin.startswith("kernelbench:"):
        path = origin.split(":", 1)[1]
        if not path:
            raise OriginError("kernelbench: needs a path, e.g. kernelbench:/data/KernelBench")
        return load_kernelbench_repo(path)
    if origin.startswith("hf:"):
        name = origin.split(":", 1)[1]
        if not name:
            raise OriginError(f"hf: needs a dataset name or a local data path, e.g. hf:{DEFAULT_HF_DATASET}")
        return load_hf_dataset(name)
    raise OriginError(f"unknown task source {origin!r}: use builtin, family:NAME, kernelbench:PATH or hf:NAME")


def origin_for_id(task_id: str, origin: str | None) -> str:
    """The origin to look `task_id` up in: the one given, else the one its prefix implies."""
    if origin:
        return origin
    if task_id.startswith("kb:"):
        raise OriginError(f"{task_id} is a KernelBench checkout task: pass --source kernelbench:PATH")
    if task_id.startswith("hf:"):
        return f"hf:{DEFAULT_HF_DATASET}"
    if family_of_id(task_id):
        return family_of_id(task_id)
    return "builtin"


def find_task(task_id: str, origin: str | None = None) -> Task:
    """The task with `task_id` (the origin's prefix may be left off: `L1/19_ReLU` finds `kb:L1/19_ReLU`)."""
    origin = origin_for_id(task_id, origin)
    tasks = load_tasks(origin)
    for task in tasks:
        if task.id == task_id or task.id.split(":", 1)[-1] == task_id:
            return task
    raise OriginError(f"no task {task_id!r} in {origin} ({len(tasks)} tasks; see `kernel-agent tasks list`)")
