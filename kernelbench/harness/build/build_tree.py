"""Bringing a build folder back from a sandboxed child: regular files and folders only, never a link, and
only within bounds; removing any tree a child wrote without recursion and without following a link.

The build folder is the candidate's: the compile child writes it, so nothing the parent does as root may
follow a path inside it (a planted `ext/x -> /etc` would turn "remove the stale `ext/*/lock`" into a
deletion outside every sandbox). The child builds in a private folder mounted at the entry's path; the
parent then brings back regular files and folders only (`import_tree`: `lstat`, `O_NOFOLLOW`, bounded in
entries, depth, per-file and total bytes: `BUILD_BOUNDS`) into a fresh tree it swaps in (`swap_in`). Trees
a child wrote are removed with `remove_tree`, never `shutil.rmtree` (which recurses once per level).
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

BUILD_MAX_MB = 2048
"""Most megabytes of one file the parent copies from a child's folder for itself (a PCH: ~170 MB)."""


@dataclass(frozen=True)
class TreeBounds:
    """What the parent accepts of a tree a child wrote, checked while it is read and before any tool runs on it.

    Why: every file is work for the parent (a copy, a hash for the manifest, an `nm` run, bytes in the build
    cache); a compile child that leaves 3,000 tiny ELF files cost 3,000 `nm` runs (minutes) on every
    evaluation. Defaults: an honest CPU ReLU's build folder holds 7 entries at depth 1, 808 KB, its largest
    file 503 KB (measured in tests/test_tree_attacks.py: sources, `build.ninja`, ninja's logs, the object,
    the library); a CUDA Triton cache holds ~8 files per kernel at depth 2; a library with many CUDA
    architectures, tens of MB. Each bound is 10x or more above that."""

    max_entries: int = 1000
    """Files, folders and anything else (links, fifos are counted, then skipped)."""
    max_depth: int = 8
    """Folders below the root (`ext/NAME/file` is depth 1; Triton's `ext/triton-cache/HASH/file` is 2)."""
    max_file_bytes: int = 256 << 20
    """Bytes of one file."""
    max_total_bytes: int = 512 << 20
    """Bytes of all files: the most one build cache entry may hold (a larger build is refused)."""


BUILD_BOUNDS = TreeBounds()
TREE_TOO_LARGE = "build:tree_too_large"
"""The flag of a candidate whose compile left a build folder over `BUILD_BOUNDS` (status `rejected`)."""
REMOVE_MAX_ENTRIES = 10_000_000
"""Most entries `remove_tree` deletes before it gives up loudly: a bound, so the parent's work ends even on
a tree something keeps writing (every child's processes are dead before its tree is removed)."""


class BuildTreeError(ValueError):
    """A build folder the child left cannot be brought back (not a regular file where one was listed)."""


class TreeTooLarge(BuildTreeError):
    """A build folder the child left is over its bounds (`TreeBounds`): the candidate's fault."""


def copy_regular(dir_fd: int | str, name: str, dest: str, budget: int) -> int:
    """Copy the regular file `name` of the folder `dir_fd` (an fd, or a path opened without following its
    last link) to the new file `dest` with its mtime (ninja compares them); at most `budget` bytes, else
    TreeTooLarge. Never follows a link: the file is opened with O_NOFOLLOW and checked with fstat."""
    own = isinstance(dir_fd, str)
    dfd = os.open(dir_fd, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW) if own else dir_fd
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    finally:
        if own:
            os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BuildTreeError(f"{name} is not a regular file")
        if st.st_size > budget:
            raise TreeTooLarge(f"{name} ({st.st_size >> 20} MB) is over the {budget >> 20} MB left to it")
        mode = 0o755 if st.st_mode & 0o111 else 0o644
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            copied = 0
            while chunk := os.read(fd, 1 << 20):
                copied += len(chunk)
                if copied > budget:
                    raise TreeTooLarge(f"{name} grew over the {budget >> 20} MB left to it")
                os.write(out, chunk)
        finally:
            os.close(out)
        os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))
        return copied
    finally:
        os.close(fd)


def import_tree(src: str, dest: str, bounds: TreeBounds = BUILD_BOUNDS) -> int:
    """Copy the folders and regular files of `src`, a tree untrusted code wrote, into `dest` (created here;
    must not exist), keeping mtimes; returns the bytes copied.

    Why: the parent runs as root; any path it follows inside a candidate-writable tree can be a planted
    link to anywhere on the host, and every entry is work for the parent and room in the build cache.
    Covers: links (file or folder) are skipped, never followed (every folder opened with O_NOFOLLOW
    relative to its parent's fd, every file with O_NOFOLLOW and checked with fstat); fifos, sockets and
    device files are skipped; torch's build baton (`lock`) is dropped (a stale one would stall the next
    load_inline); entries, depth, each file's and all files' bytes are bounded (`bounds`; TreeTooLarge as
    soon as one is passed, so the walk reads at most `max_entries` + 1 entries; a caller removes `dest`).
    Not covered: the content of the files (the built library is judged by `kernelbench.harness.build.symbols`,
    and runs only sandboxed)."""
    budget = [bounds.max_total_bytes, bounds.max_entries]
    os.mkdir(dest, 0o755)

    def walk(dfd: int, out: str, depth: int) -> None:
        if depth > bounds.max_depth:
            raise TreeTooLarge(f"the build folder is nested deeper than {bounds.max_depth} folders")
        with os.scandir(dfd) as entries:
            for entry in entries:
                budget[1] -= 1
                if budget[1] < 0:
                    raise TreeTooLarge(f"the build folder holds more than {bounds.max_entries} entries")
                st = os.stat(entry.name, dir_fd=dfd, follow_symlinks=False)
                target = os.path.join(out, entry.name)
                if stat.S_ISDIR(st.st_mode):
                    sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
                    try:
                        os.mkdir(target, 0o755)
                        walk(sub, target, depth + 1)
                        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
                    finally:
                        os.close(sub)
                elif stat.S_ISREG(st.st_mode) and entry.name != "lock":
                    limit = min(budget[0], bounds.max_file_bytes)
                    budget[0] -= copy_regular(dfd, entry.name, target, limit)

    root = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        walk(root, dest, 0)
    finally:
        os.close(root)
    return bounds.max_total_bytes - budget[0]


def swap_in(entry: Path, fresh: str) -> None:
    """Make `fresh` (a folder in `entry`, written by the parent) the entry's `ext/`; the old one is removed
    (`remove_tree`)."""
    ext = entry / "ext"
    old = entry / f"ext.old-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.rename(ext, old)
    except FileNotFoundError:
        old = None
    os.rename(fresh, ext)
    if old is not None:
        remove_tree(str(old))


def remove_tree(path: str | Path, max_entries: int = REMOVE_MAX_ENTRIES) -> bool:
    """Remove `path` (a file, or a folder and all it holds) as a tree a sandboxed child wrote; True when it is
    gone. Never raises for the tree: a failure is logged as an error (the tree stays on the host) and is
    False, never a crash of the evaluation.

    Why: `shutil.rmtree` recurses once per folder level (a 1,500-deep chain raised RecursionError, which
    `ignore_errors` does not catch: `harness_error`, folders left behind). Covers: any depth, with one
    open folder at a time (descending by fd, climbing by `..` checked against the device and inode it came
    from); links are removed, never followed (O_NOFOLLOW, `lstat` types); at most `max_entries` entries.
    Not covered: a tree something still writes (callers remove trees of dead children only)."""
    path = str(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError as e:
        log.error("could not remove %s (written by a sandboxed child; left on the host): %s", path, e)
        return False
    try:
        if stat.S_ISDIR(st.st_mode):
            _remove_contents(path, max_entries)
            os.rmdir(path)
        else:
            os.unlink(path)
        return True
    except (OSError, BuildTreeError) as e:
        log.error("could not remove %s (written by a sandboxed child; left on the host): %s", path, e)
        return False


def _clear_files(dfd: int, budget: list[int]) -> list[str]:
    """Unlink every entry of the folder `dfd` that is not a folder; the names of its folders."""
    folders = []
    with os.scandir(dfd) as entries:
        for entry in entries:
            budget[0] -= 1
            if budget[0] < 0:
                raise BuildTreeError("more entries than remove_tree removes")
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=dfd)
    return folders


def _remove_contents(path: str, max_entries: int) -> None:
    """Empty the folder `path` depth first, holding one folder fd at a time and a name list per level."""
    budget = [max_entries]
    cur = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        pending = _clear_files(cur, budget)
        above: list[tuple[list[str], str, int, int]] = []  # (parent's pending folders, name, parent dev, inode)
        while True:
            if pending:
                name = pending.pop()
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=cur)
                here = os.fstat(cur)
                above.append((pending, name, here.st_dev, here.st_ino))
                os.close(cur)
                cur = sub
                pending = _clear_files(cur, budget)
                continue
            if not above:
                return
            pending, name, dev, ino = above.pop()
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=cur)
            os.close(cur)
            cur = up
            here = os.fstat(cur)
            if (here.st_dev, here.st_ino) != (dev, ino):
                raise BuildTreeError(f"a folder under {path} moved while it was removed")
            os.rmdir(name, dir_fd=cur)
    finally:
        os.close(cur)
