"""Recorded CPU sizes of KernelBench's own problems: `kernelbench/tasks/kernelbench_cpu_sizes.json`.

KernelBench's files carry only their GPU sizes (a 4096x393216 ReLU), so `--size cpu` would run them for
seconds to minutes per call. scripts/kernelbench_cpu_sizes.py derives, per problem, new values for its
module-level size constants (kernelbench/tasks/size_plan.py, measured by kernelbench/sizes/size_probe.py) and records
them here, keyed by `kb:L{level}/{stem}` with a hash of the problem's text: a changed problem is refused
rather than given a size derived for another text. Only derived numbers live in the file, never
KernelBench's code. A problem that defines its own `CPU_SIZE` keeps it; these records never override it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelbench.tasks.size_plan import plan_sizes
from kernelbench.tasks.task import Task, TaskFormatError

RECORDS_FILE = Path(__file__).with_name("kernelbench_cpu_sizes.json")
RECORDS_ENV = "KERNEL_AGENT_CPU_SIZES"
"""Another records file to read instead of the packaged one (tests, a private checkout's sizes)."""
RANGE_MS = (1.0, 20.0)
"""The target: the reference's forward in this many milliseconds on one CPU thread."""
STATUSES = ("sized", "fast", "slow", "unscalable")
DERIVE_HINT = "python3 scripts/kernelbench_cpu_sizes.py PATH --only"


@dataclass(frozen=True)
class CpuSizeRecord:
    """One problem's derived CPU size and how its reference ran at that size."""

    task_id: str
    source_sha256: str
    """First 16 hex digits of the SHA-256 of the problem's text (line endings normalised)."""
    status: str
    """`sized` (reference in 1-20 ms on one thread), `fast` (under 1 ms at its own size: sizes only shrink),
    `slow` (over 20 ms even at the smallest consistent size; that size is still used) or `unscalable`
    (no size that runs: `overrides` is None and `--size cpu` refuses the task)."""
    overrides: dict[str, Any] | None
    """New values of module constants, applied like a `CPU_SIZE` dict; {} keeps the file's own."""
    cpu_ms: float = 0.0
    """Median thread CPU time of one reference forward at this size, one thread (equals wall time on an
    idle core; unlike wall time it holds still on a loaded machine)."""
    wall_ms: float = 0.0
    """Median wall time of the same calls (inflated when the machine was loaded)."""
    reason: str = ""
    """Why the status is not `sized`, or what was kept and why."""
    alpha: float = 1.0
    """The scale the sizes were drawn at: each scaled integer became about value ** alpha."""
    frozen: list[str] = field(default_factory=list)
    """Size constants kept at their value because scaling them broke the problem."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CpuSizeRecord":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    @property
    def in_range(self) -> bool:
        return self.overrides is not None and RANGE_MS[0] <= self.cpu_ms <= RANGE_MS[1]

    def describe(self) -> str:
        """One line for `tasks list --size cpu`."""
        if self.overrides is None:
            return f"no: {self.reason}"
        sizes = ", ".join(f"{k}={v}" for k, v in self.overrides.items()) or "own sizes"
        note = f" ({self.status}: {self.reason})" if self.status != "sized" else f" ({self.reason})" if self.reason else ""
        return f"{self.cpu_ms:.1f} ms: {sizes}{note}"


def source_sha(source: str) -> str:
    return hashlib.sha256(source.replace("\r\n", "\n").encode("utf-8")).hexdigest()[:16]


def record_key(task: Task) -> str:
    """`kb:L1/19_ReLU` for a checkout's task and for the same problem from the Hugging Face dataset."""
    return "kb:" + task.id.split(":", 1)[-1] if task.id.startswith(("kb:", "hf:")) else ""


def records_path() -> Path:
    return Path(os.environ.get(RECORDS_ENV) or RECORDS_FILE)


_CACHE: dict[str, tuple[float, dict[str, CpuSizeRecord]]] = {}


def load_records(path: str | Path | None = None) -> dict[str, CpuSizeRecord]:
    """All records of a file (cached while its mtime holds); {} when there is no file."""
    path = Path(path or records_path())
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return {}
    cached = _CACHE.get(str(path))
    if cached and cached[0] == mtime:
        return cached[1]
    data = json.loads(path.read_text())
    records = {key: CpuSizeRecord.from_dict({"task_id": key, **value}) for key, value in data.get("tasks", {}).items()}
    _CACHE[str(path)] = (mtime, records)
    return records


def update_records(new: dict[str, CpuSizeRecord], path: str | Path | None = None) -> dict[str, CpuSizeRecord]:
    """Merge `new` into the file under a lock (several derivations may run at once, by level or id) and
    write it atomically; returns the merged records."""
    path = Path(path or records_path())
    lock_name = f"kernel-agent-cpu-sizes-{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}.lock"
    with open(os.path.join(tempfile.gettempdir(), lock_name), "w") as lock:  # not beside the file: not in the repo
        fcntl.flock(lock, fcntl.LOCK_EX)
        _CACHE.pop(str(path), None)
        records = dict(load_records(path))
        records.update(new)
        body = {"about": "CPU sizes of KernelBench problems, derived by scripts/kernelbench_cpu_sizes.py; "
                         "cpu_ms is one reference forward on one thread (median thread CPU time)",
                "tasks": {k: {f: v for f, v in records[k].to_dict().items() if f != "task_id"}
                          for k in sorted(records, key=_order)}}
        tmp = Path(str(path) + ".tmp")
        tmp.write_text(json.dumps(body, indent=1) + "\n")
        os.replace(tmp, path)
        _CACHE.pop(str(path), None)
    return records


def _order(key: str) -> tuple[int, int, str]:
    level, _, stem = key.removeprefix("kb:L").partition("/")
    number = stem.split("_", 1)[0]
    return (int(level) if level.isdigit() else 99, int(number) if number.isdigit() else 0, stem)


def lookup(task: Task) -> CpuSizeRecord | None:
    """The record for `task` when one was derived for exactly its text (by id, or for a problem file given
    by path by its text alone); a checkout task whose text changed since raises TaskFormatError (a stale
    size could be inconsistent with the new file)."""
    key = record_key(task)
    if not key:  # a problem given by its path (`eval --task FILE`): the record of the same text, if any
        sha = source_sha(task.source)
        return next((r for r in load_records().values() if r.source_sha256 == sha), None)
    record = load_records().get(key)
    if record is None:
        return None
    if record.source_sha256 != source_sha(task.source):
        if task.id.startswith("hf:"):  # the dataset's copy differs in formatting: no size, not an error
            return None
        raise TaskFormatError(f"{task.path or task.id}: the recorded CPU size of {key} was derived for another "
                              f"version of this problem (hash {record.source_sha256}, now {source_sha(task.source)}); "
                              f"re-derive it: {DERIVE_HINT} {key.removeprefix('kb:')}")
    return record


def recorded_overrides(task: Task) -> dict[str, Any]:
    """The `CPU_SIZE`-style overrides recorded for `task`, {} when none; raises when unscalable or stale."""
    record = lookup(task)
    if record is None:
        return {}
    if record.overrides is None:
        raise TaskFormatError(f"{task.path or task.id}: no CPU size for {record.task_id}: {record.reason} "
                              f"(use --size gpu on a GPU)")
    return record.overrides


def apply_overrides(module: Any, overrides: dict[str, Any]) -> None:
    """Set the module constants; a list read back from JSON becomes a tuple where the file had a tuple."""
    for name, value in overrides.items():
        if isinstance(value, list) and isinstance(getattr(module, name, None), tuple):
            value = tuple(value)
        setattr(module, name, value)


def cpu_size_of(task: Task) -> dict[str, Any]:
    """For `tasks list --size cpu`: whether `task` has a CPU size and a line saying which or why not.
    Reads files only (a task's own `CPU_SIZE` is found with `ast`); nothing is executed."""

    try:
        own = "CPU_SIZE" in plan_sizes(task.source).constants or "CPU_SIZE =" in task.source
    except SyntaxError:
        own = False
    if own:
        return {"has_size": True, "in_range": None, "text": "its own CPU_SIZE"}
    if task.needs_weights:
        return {"has_size": False, "in_range": None, "text": "no: a level-4 problem needs Hugging Face weights"}
    key = record_key(task)
    record = load_records().get(key) if key else None
    if record is None:
        return {"has_size": False, "in_range": None,
                "text": "no: not derived" if key else "no: sizes for the GPU only (no CPU_SIZE)"}
    if record.source_sha256 != source_sha(task.source):
        return {"has_size": False, "in_range": None, "text": "no: the problem changed since its size was derived"}
    return {"has_size": record.overrides is not None, "in_range": record.in_range, "text": record.describe()}
