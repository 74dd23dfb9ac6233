"""KernelBench as a Hugging Face dataset: `hf:ScalingIntelligence/KernelBench`, or `hf:PATH` to local data.

The hub dataset has splits `level_1`..`level_4` and columns `code`, `level`, `name`, `problem_id`
(name is the problem file's name, e.g. `19_ReLU.py`). Ids are `hf:L{level}/{problem_id}_{name}` with
`.py` and a repeated `{problem_id}_` prefix dropped, so they match a checkout's `kb:` ids after the
prefix and the two origins share splits (see `kernelbench.tasks.splits`).

Loading goes through `datasets` and never has to download: a hub name resolves from the local cache
when `HF_DATASETS_OFFLINE=1`; a local path may be a parquet / json / jsonl / csv file, a folder of
such files, or a folder written by `save_to_disk`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from kernelbench.tasks.task import OriginError, Task
from kernelbench.tasks.task_file import inspect_source

COLUMNS = ("code", "level", "name", "problem_id")
WEIGHTS_LEVEL = 4
BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}
SPLIT_NAME = re.compile(r"^level_(\d+)$")


def _data_files(path: Path) -> tuple[str, list[str]]:
    """(datasets builder name, files) for a local file or folder of data files of one format."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in BUILDERS and p.is_file())
    if not files:
        raise OriginError(f"hf:{path}: no {', '.join(sorted(BUILDERS))} files here")
    kinds = {BUILDERS.get(p.suffix, "") for p in files}
    if "" in kinds:
        raise OriginError(f"hf:{path}: unsupported data file type {path.suffix!r} (use {', '.join(sorted(BUILDERS))})")
    if len(kinds) > 1:
        raise OriginError(f"hf:{path}: mixed data file formats {sorted(kinds)}; keep one format per folder")
    return kinds.pop(), [str(p) for p in files]


def _open(name: str, cache_dir: str | None) -> Any:
    """A `datasets.Dataset` or `DatasetDict` for a hub name or a local path."""
    path = Path(name).expanduser()
    if not path.exists() and (name.startswith(("/", ".", "~")) or path.suffix in BUILDERS):
        raise OriginError(f"hf:{name}: no such file or directory")
    import datasets  # imported here: it costs about a second and only this origin needs it

    try:
        if path.is_dir() and ((path / "dataset_dict.json").exists() or (path / "state.json").exists()):
            return datasets.load_from_disk(str(path))
        if path.exists():
            builder, files = _data_files(path)
            return datasets.load_dataset(builder, data_files=files, cache_dir=cache_dir)
        return datasets.load_dataset(name, cache_dir=cache_dir)
    except OriginError:
        raise
    except Exception as e:  # offline with no cache, a wrong name, an unreadable file: one clear line
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise OriginError(f"hf:{name}: cannot load the dataset ({type(e).__name__}: {first})") from None


def _rows(data: Any) -> Iterable[tuple[str, dict]]:
    """(split name, row) over every split."""
    splits = data.items() if hasattr(data, "items") else [("", data)]
    for split, table in splits:
        missing = [c for c in COLUMNS if c not in table.column_names and not (c == "level" and SPLIT_NAME.match(split))]
        if missing:
            raise OriginError(f"dataset split {split or '(single)'} lacks column(s) {', '.join(missing)}; "
                              f"need {', '.join(COLUMNS)}")
        for row in table:
            yield split, row


def problem_name(problem_id: int, name: str) -> str:
    """`19_ReLU` from (19, `19_ReLU.py`) or (19, `ReLU`)."""
    stem = name[:-3] if name.endswith(".py") else name
    prefix = f"{problem_id}_"
    return stem if stem.startswith(prefix) else prefix + stem


def load_hf_dataset(name: str, cache_dir: str | None = None) -> list[Task]:
    """Every problem of the dataset, by level then problem id."""
    data = _open(name, cache_dir)
    origin = f"hf:{name}"
    tasks: dict[str, Task] = {}
    for split, row in _rows(data):
        try:
            split_level = SPLIT_NAME.match(split)
            level = int(row["level"] if row.get("level") is not None else split_level.group(1))
            problem_id = int(row["problem_id"])
        except (TypeError, ValueError, AttributeError) as e:
            raise OriginError(f"{origin}: row {row.get('name')!r} has no usable level / problem_id ({e})") from None
        stem = problem_name(problem_id, str(row["name"]))
        task_id = f"hf:L{level}/{stem}"
        source = str(row["code"])
        tasks.setdefault(task_id, Task(
            id=task_id,
            level=level,
            name=stem,
            origin=origin,
            source=source,
            needs_weights=level == WEIGHTS_LEVEL,
            op_policy=inspect_source(source).op_policy or "strict",
        ))
    return sorted(tasks.values(), key=lambda t: (t.level, int(t.name.split("_", 1)[0]), t.name))
