"""Bringing a build folder back from a sandboxed child: regular files and folders only, never a link.

The build folder is the candidate's: the compile child writes it, so nothing the parent does as root may
follow a path inside it (a planted `ext/x -> /etc` would turn "remove the stale `ext/*/lock`" into a
deletion outside every sandbox). The child builds in a private folder mounted at the entry's path; the
parent then brings back regular files and folders only (`import_tree`: `lstat`, `O_NOFOLLOW`, size-bounded)
into a fresh tree it swaps in (`swap_in`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from pathlib import Path

BUILD_MAX_MB = 2048
"""Most megabytes of files a compile child may leave in its build folder (brought back by `import_tree`)."""


class BuildTreeError(ValueError):
    """A build folder the child left is over its size bound (`import_tree`)."""


def copy_regular(dir_fd: int | str, name: str, dest: str, budget: int) -> int:
    """Copy the regular file `name` of the folder `dir_fd` (an fd, or a path opened without following its
    last link) to the new file `dest` with its mtime (ninja compares them); at most `budget` bytes, else
    BuildTreeError. Never follows a link: the file is opened with O_NOFOLLOW and checked with fstat."""
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
            raise BuildTreeError(f"the build folder holds more than {BUILD_MAX_MB} MB")
        mode = 0o755 if st.st_mode & 0o111 else 0o644
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            copied = 0
            while chunk := os.read(fd, 1 << 20):
                copied += len(chunk)
                if copied > budget:
                    raise BuildTreeError(f"the build folder holds more than {BUILD_MAX_MB} MB")
                os.write(out, chunk)
        finally:
            os.close(out)
        os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))
        return copied
    finally:
        os.close(fd)


def import_tree(src: str, dest: str, max_bytes: int = BUILD_MAX_MB << 20) -> int:
    """Copy the folders and regular files of `src`, a tree untrusted code wrote, into `dest` (created here;
    must not exist), keeping mtimes; returns the bytes copied.

    Why: the parent runs as root; any path it follows inside a candidate-writable tree can be a planted
    link to anywhere on the host. Covers: links (file or folder) are skipped, never followed (every folder
    opened with O_NOFOLLOW relative to its parent's fd, every file with O_NOFOLLOW and checked with
    fstat); fifos, sockets and device files are skipped; torch's build baton (`lock`) is dropped (a stale
    one would stall the next load_inline); the total is bounded (BuildTreeError). Not covered: the content
    of the files (the built library is judged by `kernelbench.harness.symbols`, and runs only sandboxed)."""
    budget = [max_bytes]
    os.mkdir(dest, 0o755)

    def walk(dfd: int, out: str, depth: int) -> None:
        if depth > 32:
            raise BuildTreeError("the build folder is nested too deep")
        for entry in os.scandir(dfd):
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
                budget[0] -= copy_regular(dfd, entry.name, target, budget[0])

    root = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        walk(root, dest, 0)
    finally:
        os.close(root)
    return max_bytes - budget[0]


def swap_in(entry: Path, fresh: str) -> None:
    """Make `fresh` (a folder in `entry`, written by the parent) the entry's `ext/`; the old one is removed
    with rmtree, which does not follow links (`shutil.rmtree.avoids_symlink_attacks` on Linux)."""
    ext = entry / "ext"
    old = entry / f"ext.old-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.rename(ext, old)
    except FileNotFoundError:
        old = None
    os.rename(fresh, ext)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
