"""Trees a candidate makes in its compile, through the real harness (real compiles, real sandboxed children):
thousands of tiny ELF files in its build folder, a big file there, a 1,500-deep chain of folders in its working
folder (tests/adversarial/build_tree_flood.py). The parent's work on them is bounded and each is the
candidate's verdict, never a `harness_error`; the build cache holds no more than its quota.

The attack's library shares one build across the variants (only the Python numbers differ), so one compile
serves the whole file; each variant still runs its own import child."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

from kernelbench.harness.build import build_tree, cache_quota, symbols
from kernelbench.harness.build.build_tree import TREE_TOO_LARGE
from kernelbench.harness.evaluate import evaluate
from kernelbench.harness.result import HARNESS_ERROR, REJECTED
from tests.test_adversarial import BUILD_ATTACKS, TASKS, assert_zero, config, describe, source


def flood(elf_files: int = 0, big_mb: int = 0, depth: int = 0) -> str:
    return source("build_tree_flood.py", ELF_FILES=str(elf_files), BIG_MB=str(big_mb), DEPTH=str(depth))


def cache_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def chains_left() -> set[str]:
    """Children's working and build folders on the host that still hold the attack's chain."""
    return {d for d in glob.glob("/tmp/ka-*") if os.path.isdir(os.path.join(d, "d", "d", "d"))}


def test_elf_flood_is_refused_before_any_nm_runs(tmp_path, monkeypatch):
    """3,000 tiny ELF files cost the base code 3,000 `nm` runs (+104 s on 2 cores), again on every cache hit:
    now the build folder is over its bounds when it comes back, the candidate is rejected, and nm never
    runs, on the first evaluation or a repeated one."""
    calls: list[str] = []
    real = symbols.undefined_symbols
    monkeypatch.setattr(symbols, "undefined_symbols", lambda lib, *a: calls.append(lib) or real(lib, *a))
    cache = str(tmp_path / "builds")
    first = evaluate(TASKS["relu"], flood(), config(cache))  # the shared build: one library, one nm
    assert first.status == REJECTED and "build:cpp_io_or_syscalls" in first.flags, describe(first)
    assert len(calls) == 1
    for attempt in range(2):
        start = time.perf_counter()
        result = evaluate(TASKS["relu"], flood(elf_files=3000), config(cache))
        assert result.status == REJECTED and result.flags == (BUILD_ATTACKS["build_tree_flood.py"],), describe(result)
        assert "more than 1000 entries" in result.feedback, describe(result)
        assert len(calls) == 1, f"nm ran {len(calls) - 1} times on the flooded build"
        print(f"ELF flood, evaluation {attempt + 1}: {time.perf_counter() - start:.1f} s")
        assert_zero(result)
    again = evaluate(TASKS["relu"], flood(), config(cache))  # a hit on the kept build: its verdict is kept too
    assert again.flags == first.flags and len(calls) == 1, describe(again)


def test_deep_chain_is_removed_and_never_a_harness_error(tmp_path):
    """A 1,500-deep chain in the compile child's working folder: the base code's `shutil.rmtree` raised
    RecursionError (`harness_error`, never scored) and left the chain on the host. Now it is removed, and the
    candidate is judged on its build (its library opens files: rejected)."""
    before = chains_left()
    result = evaluate(TASKS["relu"], flood(depth=1500), config(str(tmp_path / "builds")))
    assert result.status != HARNESS_ERROR, describe(result)
    assert result.status == REJECTED and "build:cpp_io_or_syscalls" in result.flags, describe(result)
    assert chains_left() - before == set(), "a child's folder with the chain was left on the host"
    assert_zero(result)
    # static checks off: the library is not judged, so the run child imports the file too and makes the
    # chain again in its own folder, which the parent removes after the run stage
    result = evaluate(TASKS["relu"], flood(depth=1500), config(str(tmp_path / "builds"), static_checks=False))
    assert result.status != HARNESS_ERROR and result.compiled, describe(result)
    assert chains_left() - before == set(), "a child's folder with the chain was left on the host"


def test_big_file_is_refused_and_the_cache_keeps_its_quota(tmp_path, monkeypatch):
    """A 300 MB file in the build folder (the base code kept 512 MB per entry, no quota on the cache) is over
    the per-file bound: rejected, nothing of it cached. A 100 MB one is within the entry's bounds and is
    cached; the next build over the (tiny, for the test) quota evicts it, least recently used first."""
    root = tmp_path / "builds"
    result = evaluate(TASKS["relu"], flood(big_mb=300), config(str(root)))
    assert result.status == REJECTED and result.flags == (TREE_TOO_LARGE,), describe(result)
    assert cache_bytes(root) < 50 << 20, "the refused build's file reached the cache"
    result = evaluate(TASKS["relu"], flood(big_mb=100), config(str(root)))
    assert result.status == REJECTED and "build:cpp_io_or_syscalls" in result.flags, describe(result)
    assert cache_bytes(root) > 100 << 20
    monkeypatch.setattr(cache_quota, "BUILD_CACHE_QUOTA_MB", 50)
    monkeypatch.setattr(cache_quota, "BUILD_EVICT_GRACE_S", 0.0)
    honest = evaluate(TASKS["relu"], source("honest_relu.py"), config(str(root)))
    assert honest.compiled and honest.status != HARNESS_ERROR, describe(honest)  # its timing is not judged here
    assert cache_bytes(root) < 50 << 20, "the build cache is over its quota"
    assert len([p for p in root.iterdir() if p.is_dir()]) == 1, "the least recently used entry was not evicted"
    (entry,) = [p for p in root.iterdir() if p.is_dir()]
    assert_well_inside_bounds(entry / "ext")


def assert_well_inside_bounds(ext: Path) -> None:
    """The bounds' justification, measured: an honest build folder (a ReLU's) is 10x inside every one."""
    files = [p for p in ext.rglob("*")]
    depth = max(len(p.relative_to(ext).parts) - 1 for p in files)
    size = sum(p.stat().st_size for p in files if p.is_file())
    largest = max(p.stat().st_size for p in files if p.is_file())
    print(f"honest build folder: {len(files)} entries, depth {depth}, {size >> 10} KB, largest file {largest >> 10} KB")
    bounds = build_tree.BUILD_BOUNDS
    assert len(files) * 10 <= bounds.max_entries and depth * 4 <= bounds.max_depth
    assert largest * 10 <= bounds.max_file_bytes and size * 10 <= bounds.max_total_bytes
