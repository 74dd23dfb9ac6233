"""Deterministic train / held-out splits that never move a task when others are added.

A task's split depends on nothing but its own canonical key, `origin kind | L<level> | name`, hashed
with SHA-256 into [0, 1): the task is held out when the value is below `HELDOUT_FRACTION` (10 %, as
Kevin-32B held out 20 of its 200 level-1/2 KernelBench tasks; arXiv 2507.11948). The key leaves out
the path, so the same KernelBench problem gets the same split whether it comes from a checkout
(`kernelbench:PATH`) or from the Hugging Face dataset (`hf:NAME`), wherever either lives. Because no
task's split looks at any other task, adding problems (a newer KernelBench, new built-in tasks) leaves
every existing task where it was; hashing within each level keeps the split stratified by level.

Split names:
- `train`: not held out, and in the origin's training pool (built-in: levels 1-3; KernelBench:
  levels 1-2, the pool Kevin-32B trained on).
- `heldout`: held out by the hash rule, on every level.
- `extra`: KernelBench levels 3-4 tasks that are not held out: outside the default training pool and
  outside the held-out benchmark; listed under `all`.
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from typing import Iterable

from kernelbench.tasks.builtin import load_builtin
from kernelbench.tasks.family import split_of as family_split
from kernelbench.tasks.task import Task

HELDOUT_FRACTION = 0.1
"""Share of each level held out (Kevin-32B: 20 of 200 level-1/2 tasks)."""

BUILTIN_SALT = "builtin-0"
"""Salt for the built-in suite, chosen so that every level has at least one held-out task (pure
hashing of a suite of ~10-30 tasks per level can leave a level with none). Fixed, so splits stay
stable; re-run `python -m kernelbench.tasks.splits` only if tasks are removed or renamed."""

KERNELBENCH_SALT = ""
"""KernelBench (checkout or dataset) is hashed unsalted."""

KERNELBENCH_TRAIN_LEVELS = (1, 2)
"""KernelBench's default training pool: levels 1-2, as Kevin-32B (arXiv 2507.11948)."""

SPLITS = ("train", "heldout", "extra")
CHOICES = SPLITS + ("all",)


def origin_kind(origin: str) -> str:
    """`builtin` for the built-in suite; `kernelbench` for both a checkout and the HF dataset."""
    if origin == "builtin":
        return "builtin"
    if origin.startswith(("kernelbench:", "hf:")):
        return "kernelbench"
    if origin.startswith("family:"):
        return "family"
    raise ValueError(f"unknown task origin {origin!r}")


def canonical_name(task: Task) -> str:
    """The problem name as it appears in the id after the level (`19_ReLU`, `03_gelu`)."""
    return task.id.rsplit("/", 1)[-1]


def split_key(task: Task, salt: str | None = None) -> str:
    """`salt|kind|L<level>|name`: the only thing a task's split depends on (no path, no other task)."""
    kind = origin_kind(task.origin)
    if salt is None:
        salt = BUILTIN_SALT if kind == "builtin" else KERNELBENCH_SALT
    return f"{salt}|{kind}|L{task.level}|{canonical_name(task)}"


def unit_hash(key: str) -> float:
    """SHA-256 of `key` mapped to [0, 1): stable across Python versions and machines (unlike `hash`)."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def is_heldout(task: Task) -> bool:
    return unit_hash(split_key(task)) < HELDOUT_FRACTION


def split_of(task: Task) -> str:
    """`train`, `heldout` or `extra` (see the module docstring); a task family holds out tasks of its own choosing."""
    if origin_kind(task.origin) == "family":
        return family_split(task)
    if is_heldout(task):
        return "heldout"
    if origin_kind(task.origin) == "kernelbench" and task.level not in KERNELBENCH_TRAIN_LEVELS:
        return "extra"
    return "train"


def select(tasks: Iterable[Task], split: str) -> list[Task]:
    """Tasks of one split, in their given order; `all` keeps every task."""
    if split not in CHOICES:
        raise ValueError(f"split must be one of {', '.join(CHOICES)}, got {split!r}")
    return [t for t in tasks if split == "all" or split_of(t) == split]


def heldout_per_level(tasks: Iterable[Task]) -> dict[int, tuple[int, int]]:
    """level -> (held-out count, total count)."""
    total, held = Counter(), Counter()
    for t in tasks:
        total[t.level] += 1
        held[t.level] += is_heldout(t)
    return {lvl: (held[lvl], total[lvl]) for lvl in sorted(total)}


def first_salt(tasks: list[Task], prefix: str = "builtin-", max_share: float = 0.15, tries: int = 10_000) -> str:
    """The first salt `prefix + n` under which every level of `tasks` has a held-out task and at most
    `max_share` of all tasks are held out. Used once to pick `BUILTIN_SALT`, never at run time."""
    levels = {t.level for t in tasks}
    for n in range(tries):
        salt = f"{prefix}{n}"
        held = [t for t in tasks if unit_hash(split_key(t, salt)) < HELDOUT_FRACTION]
        if {t.level for t in held} == levels and len(held) <= max_share * len(tasks):
            return salt
    raise ValueError(f"no salt among {prefix}0..{prefix}{tries - 1} holds out a task on every level")


def _report_builtin(argv: list[str]) -> int:
    """`python -m kernelbench.tasks.splits [--find-salt]`: held-out counts of the built-in suite per level."""

    tasks = load_builtin()
    if "--find-salt" in argv:
        print(first_salt(tasks))
        return 0
    counts = heldout_per_level(tasks)
    for lvl, (held, total) in counts.items():
        print(f"level {lvl}: {held} of {total} held out")
    empty = [lvl for lvl, (held, _) in counts.items() if held == 0]
    if empty:
        print(f"levels with no held-out task under BUILTIN_SALT={BUILTIN_SALT!r}: {empty}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_report_builtin(sys.argv[1:]))
