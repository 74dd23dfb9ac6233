"""Splits: deterministic, stratified by level, path-independent, and stable when tasks are added."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelbench.tasks import splits
from kernelbench.tasks.builtin import load_builtin
from kernelbench.tasks.task import Task


def make(origin: str, level: int, name: str, path: str = "") -> Task:
    prefix = {"builtin": "", "kernelbench": "kb:", "hf": "hf:"}[origin.split(":")[0]]
    return Task(id=f"{prefix}L{level}/{name}", level=level, name=name, origin=origin, source="", path=path)


def kb_suite(n_per_level: int = 400, origin: str = "kernelbench:/data/KernelBench") -> list[Task]:
    return [make(origin, lvl, f"{i}_Problem_{lvl}_{i}") for lvl in (1, 2, 3, 4) for i in range(1, n_per_level + 1)]


def test_unit_hash_is_a_fixed_function_of_the_key():
    value = splits.unit_hash("builtin-0|builtin|L1/01_relu")
    assert 0.0 <= value < 1.0
    assert value == splits.unit_hash("builtin-0|builtin|L1/01_relu")
    assert value != splits.unit_hash("builtin-0|builtin|L1/02_relu")
    # SHA-256 is fixed across Python versions and processes, unlike hash() with PYTHONHASHSEED.
    code = "from kernelbench.tasks.splits import unit_hash; print(repr(unit_hash('builtin-0|builtin|L1/01_relu')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""}).stdout.strip()
    assert float(out) == value


def test_about_ten_percent_held_out_on_every_level():
    tasks = kb_suite()
    for level, (held, total) in splits.heldout_per_level(tasks).items():
        assert 0.06 * total <= held <= 0.14 * total, (level, held, total)


def test_kernelbench_train_is_levels_1_and_2_only():
    tasks = kb_suite(100)
    by_split = {s: splits.select(tasks, s) for s in splits.CHOICES}
    assert {t.level for t in by_split["train"]} == {1, 2}
    assert {t.level for t in by_split["extra"]} == {3, 4}
    assert {t.level for t in by_split["heldout"]} == {1, 2, 3, 4}
    assert len(by_split["train"]) + len(by_split["heldout"]) + len(by_split["extra"]) == len(by_split["all"])
    assert all(splits.is_heldout(t) for t in by_split["heldout"])
    with pytest.raises(ValueError, match="split must be one of"):
        splits.select(tasks, "test")


def test_split_ignores_path_and_checkout_versus_dataset():
    a = make("kernelbench:/a/KernelBench", 1, "19_ReLU", "/a/KernelBench/level1/19_ReLU.py")
    b = make("kernelbench:/elsewhere", 1, "19_ReLU", "/elsewhere/level1/19_ReLU.py")
    c = make("hf:ScalingIntelligence/KernelBench", 1, "19_ReLU")
    assert splits.split_key(a) == splits.split_key(b) == splits.split_key(c)
    # Same problem name on another level, or in the built-in suite, is another key.
    assert splits.split_key(make("kernelbench:/a", 2, "19_ReLU")) != splits.split_key(a)
    assert splits.split_key(make("builtin", 1, "19_ReLU")) != splits.split_key(a)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.text("abcdefgh_", min_size=1, max_size=12)), max_size=40))
def test_adding_tasks_never_moves_an_existing_task(extra):
    base = kb_suite(30)
    before = {t.id: splits.split_of(t) for t in base}
    grown = base + [make("kernelbench:/data/KernelBench", lvl, f"999_{name}") for lvl, name in extra]
    after = {t.id: splits.split_of(t) for t in grown}
    assert all(after[i] == s for i, s in before.items())
    held_before = [t.id for t in splits.select(base, "heldout")]
    held_after = [t.id for t in splits.select(grown, "heldout") if t.id in before]
    assert held_before == held_after


def test_first_salt_gives_every_level_a_heldout_task():
    tasks = [make("builtin", lvl, f"{i:02d}_op") for lvl, n in ((1, 12), (2, 8), (3, 5)) for i in range(1, n + 1)]
    salt = splits.first_salt(tasks)
    held_levels = {t.level for t in tasks if splits.unit_hash(splits.split_key(t, salt)) < splits.HELDOUT_FRACTION}
    assert held_levels == {1, 2, 3}
    assert splits.first_salt(tasks) == salt  # a search from 0, so the same suite gives the same salt


def test_builtin_suite_holds_out_a_task_on_every_level():
    tasks = load_builtin()
    if not tasks:
        pytest.skip("the built-in suite is empty")
    counts = splits.heldout_per_level(tasks)
    empty = [lvl for lvl, (held, _) in counts.items() if held == 0]
    assert not empty, f"levels {empty} have no held-out task under BUILTIN_SALT={splits.BUILTIN_SALT!r}; " \
                      f"pick a new one with `python -m kernelbench.tasks.splits --find-salt`"
    assert all(splits.split_of(t) in ("train", "heldout") for t in tasks)
