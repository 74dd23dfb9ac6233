"""The parent's work on trees a candidate made is bounded (DESIGN.md rule 9): bringing a build folder back
(`build_tree.import_tree`), removing any child's tree (`build_tree.remove_tree`), reading the built libraries'
imports (`symbols.check_build`: nm under limits, its verdict kept with the entry) and the build cache's quota
(`cache_quota.evict_builds`). In-process, on real files and real `nm` runs; the attacks through a real compile
are in tests/test_tree_attacks.py."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kernelbench.harness.build import build_tree, cache_quota, symbols
from kernelbench.harness.build.build_tree import TREE_TOO_LARGE, TreeBounds

ELF_HEAD = bytes([0x7F, ord("E"), ord("L"), ord("F"), 2, 1, 1]) + b"\0" * 9 + b"\x03\0" + b"\0" * 46


def deep_chain(root: Path, depth: int, name: str = "d") -> None:
    """`depth` nested folders under `root`, made one level at a time by fd (no path is ever long)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.close(os.open("leaf", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)


# --- removal ----------------------------------------------------------------------------------------------------

def test_remove_tree_removes_a_chain_rmtree_cannot(tmp_path):
    """A 1,500-deep chain (names long enough that its path is far past PATH_MAX): `shutil.rmtree` raises
    RecursionError (a `harness_error` in the parent, folders left); `remove_tree` removes all of it."""
    for tree, name in ((tmp_path / "short", "d"), (tmp_path / "long", "n" * 200)):
        tree.mkdir()
        deep_chain(tree, 1500, name)
        with pytest.raises(RecursionError):
            shutil.rmtree(tree, ignore_errors=True)
        assert tree.exists()
        assert build_tree.remove_tree(tree) is True
        assert not tree.exists()


def test_remove_tree_never_follows_links(tmp_path):
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "sub" / "file").write_text("precious")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    os.symlink(victim, tree / "a" / "to_dir")
    os.symlink(victim / "sub" / "file", tree / "a" / "b" / "to_file")
    os.mkfifo(tree / "a" / "fifo")
    assert build_tree.remove_tree(tree) and not tree.exists()
    assert (victim / "sub" / "file").read_text() == "precious"
    os.symlink(victim, tmp_path / "link")  # the root itself a link: the link goes, never what it names
    assert build_tree.remove_tree(tmp_path / "link") and victim.exists()
    assert build_tree.remove_tree(tmp_path / "missing") is True


def test_remove_tree_failure_is_logged_never_raised(tmp_path, monkeypatch, caplog):
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "f").write_text("x")

    def refuse(*args, **kwargs):
        raise PermissionError("refused by the test")

    monkeypatch.setattr(os, "unlink", refuse)
    with caplog.at_level(logging.ERROR, logger="kernelbench.harness.build.build_tree"):
        assert build_tree.remove_tree(tree) is False
    assert tree.exists() and "could not remove" in caplog.text and "refused by the test" in caplog.text
    monkeypatch.undo()
    assert build_tree.remove_tree(tree, max_entries=1) is False  # the bound: given up on, loudly
    assert build_tree.remove_tree(tree) and not tree.exists()


# --- bringing a build folder back ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["entries", "depth", "file", "total"])
def test_import_tree_refuses_a_tree_over_its_bounds(tmp_path, case):
    src = tmp_path / "ext"
    (src / "op").mkdir(parents=True)
    (src / "op" / "op.so").write_bytes(ELF_HEAD)
    bounds = TreeBounds(max_entries=50, max_depth=3, max_file_bytes=1000, max_total_bytes=1500)
    if case == "entries":
        for i in range(5000):
            (src / "op" / f"e{i}").write_bytes(ELF_HEAD)
    elif case == "depth":
        deep_chain(src / "op", 4)
    elif case == "file":
        (src / "op" / "big.bin").write_bytes(b"\0" * 1001)
    else:
        for i in range(3):
            (src / "op" / f"part{i}").write_bytes(b"\0" * 600)
    (tmp_path / "ok").mkdir()
    for i in range(3):  # just inside: 47 entries, depth 3, a 1000-byte file, 1,340 bytes in all
        deep_chain(tmp_path / "ok", 3, f"x{i}")
    for i in range(35):
        (tmp_path / "ok" / f"f{i}").write_bytes(b"\0" * (1000 if i == 0 else 10))
    assert build_tree.import_tree(str(tmp_path / "ok"), str(tmp_path / "ok_out"), bounds) == 1340
    start = time.perf_counter()
    with pytest.raises(build_tree.TreeTooLarge):
        build_tree.import_tree(str(src), str(tmp_path / "out"), bounds)
    assert time.perf_counter() - start < 2.0  # stops at the bound, never reads the rest


# --- nm under limits, its verdict kept ------------------------------------------------------------------------

def _library(tmp_path: Path, text: str, name: str = "lib.so") -> Path:
    src = tmp_path / "lib.c"
    src.write_text(text)
    out = tmp_path / "ext" / "op" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def test_too_many_libraries_are_refused_before_nm_runs(tmp_path, monkeypatch):
    def no_nm(*args, **kwargs):
        raise AssertionError("nm ran on a tree over its bounds")

    monkeypatch.setattr(symbols, "undefined_symbols", no_nm)
    ext = tmp_path / "ext"
    (ext / "op").mkdir(parents=True)
    for i in range(symbols.MAX_LIBRARIES + 1):
        (ext / "op" / f"e{i}").write_bytes(ELF_HEAD)
    assert [v.flag for v in symbols.check_build(str(ext))] == [TREE_TOO_LARGE]
    for i in range(build_tree.BUILD_BOUNDS.max_entries):  # written in place after the import (plain child)
        (ext / "op" / f"t{i}").write_text("")
    assert [v.flag for v in symbols.check_build(str(ext))] == [TREE_TOO_LARGE]
    with pytest.raises(FileNotFoundError):  # a missing build is never a clean one
        symbols.check_build(str(tmp_path / "missing"))


def test_check_build_keeps_its_verdict_with_the_entry(tmp_path, monkeypatch):
    """A cache hit runs no nm; a library changed since (the plain child writes in place) is judged again."""
    lib = _library(tmp_path, "#include <stdio.h>\nvoid *f(const char *p) { return fopen(p, \"r\"); }\n")
    first = symbols.check_build(str(tmp_path / "ext"), cache_dir=str(tmp_path))
    assert [v.flag for v in first] == ["build:cpp_io_or_syscalls"]
    assert len(list((tmp_path / "symbols").glob("*.json"))) == 1
    calls = []
    real = symbols.undefined_symbols
    monkeypatch.setattr(symbols, "undefined_symbols", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert symbols.check_build(str(tmp_path / "ext"), cache_dir=str(tmp_path)) == first and calls == []
    lib.unlink()
    _library(tmp_path, "#include <math.h>\nfloat f(float x) { return expf(x); }\n")
    assert symbols.check_build(str(tmp_path / "ext"), cache_dir=str(tmp_path)) == [] and len(calls) == 1


_FAKE_BINS: list[Path] = []


@pytest.fixture(autouse=True)
def _remove_fake_bins():
    yield
    while _FAKE_BINS:
        shutil.rmtree(_FAKE_BINS.pop(), ignore_errors=True)


def _fake_nm(tmp_path: Path, monkeypatch, body: str) -> None:
    """An `nm` first on PATH, in a folder `nobody` may enter (pytest's tmp_path is root's alone)."""
    import tempfile

    bin_dir = Path(tempfile.mkdtemp(prefix="fake-nm-"))
    bin_dir.chmod(0o755)
    _FAKE_BINS.append(bin_dir)
    (bin_dir / "nm").write_text("#!/bin/sh\n" + body + "\n")
    (bin_dir / "nm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_nm_runs_unprivileged_under_limits(tmp_path, monkeypatch):
    lib = _library(tmp_path, "int f(int x) { return x + 1; }\n")
    _fake_nm(tmp_path, monkeypatch, 'echo "uid$(id -u)_as$(ulimit -v)_cpu$(ulimit -t)_fsize$(ulimit -f) U"')
    (name,) = symbols.undefined_symbols(str(lib))
    uid = symbols.NOBODY_UID if os.geteuid() == 0 else os.geteuid()
    assert name == f"uid{uid}_as{symbols.NM_MEMORY_MB * 1024}_cpu{int(symbols.NM_TIMEOUT_S)}_fsize0"


def test_nm_that_hangs_is_stopped_and_the_build_unreadable(tmp_path, monkeypatch):
    _library(tmp_path, "int f(int x) { return x + 1; }\n")
    _fake_nm(tmp_path, monkeypatch, "sleep 30")
    monkeypatch.setattr(symbols, "NM_TIMEOUT_S", 1.0)
    start = time.perf_counter()
    assert [v.flag for v in symbols.check_build(str(tmp_path / "ext"))] == ["build:unreadable_library"]
    assert time.perf_counter() - start < 10.0


# --- the build cache's quota -------------------------------------------------------------------------------------

def _entry(root: Path, name: str, size_mb: int, used_s: float) -> Path:
    entry = root / name
    (entry / "ext").mkdir(parents=True)
    (entry / "ext" / "lib.so").write_bytes(b"\0" * (size_mb << 20))
    cache_quota.record_size(entry, size_mb << 20)
    cache_quota.mark_used(entry)
    os.utime(entry / cache_quota.USED_STAMP, (used_s, used_s))
    return entry


def test_build_cache_evicts_least_recently_used_entries(tmp_path):
    now = time.time()
    old, older, new, kept = (_entry(tmp_path, n, 2, now - age) for n, age in
                             (("old", 500), ("older", 900), ("new", 100), ("kept", 1000)))
    (tmp_path / f"{cache_quota.EVICTED_PREFIX}stale-1").mkdir()  # an earlier eviction that could not finish
    removed = cache_quota.evict_builds(tmp_path, keep="kept", quota_mb=4, grace_s=60)
    assert [Path(p).name for p in removed][1:] == ["older", "old"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["kept", "new"]
    assert not older.exists() and not old.exists() and new.exists() and kept.exists()


def test_eviction_skips_entries_in_use(tmp_path):
    """An entry whose lock an evaluation holds (compiling, or a cache hit marking its use), or one used within
    the grace period, stays, even over the quota."""
    now = time.time()
    _entry(tmp_path, "compiling", 2, now - 1000)
    _entry(tmp_path, "hit", 2, now - 900)
    _entry(tmp_path, "recent", 2, now - 10)
    _entry(tmp_path, "idle", 2, now - 500)
    with open(tmp_path / "compiling.lock", "a") as lock, open(tmp_path / f"hit{cache_quota.USE_LOCK}", "a") as use:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fcntl.flock(use, fcntl.LOCK_SH)
        removed = cache_quota.evict_builds(tmp_path, keep="", quota_mb=1, grace_s=60)
    assert [Path(p).name for p in removed] == ["idle"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["compiling", "hit", "recent"]
