"""The build the parent checked, file for file: the run child loads that and builds nothing.

The compile stage imports the candidate and builds what its top level asks for; the parent then reads the
built libraries' imports (`kernelbench.harness.build.symbols`). The run child imports the candidate again, and builds
anything asked for later: in `ModelNew.__init__`, in the first `forward`, or with sources or flags that
differ between the two imports. It ran before new processes were refused, in a writable copy of the build
folder, so `namespace fast = at::cpu; fast::mm` built in `__init__` was never judged (full credit for
PyTorch's matmul, tests/adversarial/build_in_init.py).

Covers: after the compile stage the parent records every file of the build folder with its hash
(`record`); in the run child `refuse_builds` replaces torch's ninja step by a comparison with that record
(ninja never runs, so no compiler does) and checks the same before torch imports a library: the folder a
`load_inline` / `load` loads from must hold exactly the recorded files with their recorded contents,
after torch wrote the sources and `build.ninja` of this request (it writes only what changed). Anything
else (another source, other flags, a new name, a folder outside the build, a library written in place) is
refused with `BuildRefused` and recorded (`REFUSED`); the worker reports it and the parent rejects the
candidate (`dynamic:build_outside_compile_stage`), whether or not its code caught the error.
Not covered: a compiler run another way during import or `__init__` (`subprocess`, `os.system`) and a
library loaded by path (`ctypes.CDLL`, `torch.ops.load_library`, `importlib` on a written file): the static
rules reject those spellings (`static:forbidden_import`, `static:torch_file_api`); at run time the sandbox's
writable folders are not mounted noexec (bubblewrap 0.8 has no such option). A thread of the candidate
swapping a recorded library between the check and the load (the check is not atomic with `dlopen`).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from kernelbench.harness.child import build_flags

# Imports inside functions: torch.utils.cpp_extension (0.16 s to import) loads only when a build needs it: a warm
# `kernel-agent eval` pays every import.

FLAG = "dynamic:build_outside_compile_stage"
UNTRACKED = frozenset({"lock", ".ninja_log", ".ninja_deps"})
"""Files of a build folder that say nothing about what was built: torch's build baton and ninja's logs."""
REFUSED: list[str] = []
"""Build requests the run child refused, in order (`refuse_builds`); read by the worker for its report."""


class BuildRefused(RuntimeError):
    """A build or load in the run child that does not match what the compile stage built."""


def file_sha256(path: str) -> str:
    """sha256 of a regular file, read without following a link or blocking on a FIFO swapped in for it."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def _folder(path: str) -> dict[str, str]:
    """Name -> sha256 of the regular files directly in `path` (a torch build folder is flat); links and
    other special files are named with an empty hash, so they never match a record."""
    found = {}
    try:
        entries = list(os.scandir(path))
    except OSError:
        return {}
    for entry in entries:
        if entry.name in UNTRACKED or entry.is_dir(follow_symlinks=False):
            continue
        try:
            found[entry.name] = file_sha256(entry.path) if entry.is_file(follow_symlinks=False) else ""
        except OSError:
            found[entry.name] = ""
    return found


def record(ext_dir: str) -> dict[str, dict[str, str]]:
    """Every build folder under `ext_dir` (an entry's `ext/`, brought back by `build_tree.import_tree`: regular
    files and folders only), relative path -> {file name: sha256}."""
    out: dict[str, dict[str, str]] = {}
    for root, dirs, _ in os.walk(ext_dir):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        files = _folder(root)
        if files:
            out[os.path.relpath(root, ext_dir)] = files
    return out


def mismatch(manifest: dict[str, dict[str, str]], ext_dir: str, build_dir: str) -> str:
    """Why `build_dir` is not a recorded build folder as recorded ('' when it is)."""
    rel = os.path.relpath(os.path.realpath(build_dir), os.path.realpath(ext_dir))
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return f"{build_dir} is outside the compile stage's build folder"
    want = manifest.get(rel)
    if not want:
        return f"nothing was built in {rel} by the compile stage (a build asked for only at run time)"
    have = _folder(build_dir)
    changed = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
    return f"{rel} differs from the compile stage's build: {', '.join(changed)[:300]}" if changed else ""


def refuse_builds(manifest: dict[str, dict[str, str]], ext_dir: str) -> None:
    """In the run child, before any candidate code: torch's ninja step only compares the build folder with
    `manifest` (never runs a compiler), and a library is imported only from a folder that matches it."""
    from torch.utils import cpp_extension

    load_library = cpp_extension._import_module_from_library
    refused, check = REFUSED, mismatch

    def verify(build_directory: str, what: str) -> None:
        why = check(manifest, ext_dir, build_directory)
        if why:
            refused.append(f"{what}: {why}"[:600])
            raise BuildRefused(f"the run stage builds nothing: {why}. Call load_inline at the module's top "
                               "level, with the same sources and flags every time")

    def run_ninja_build(build_directory: str, verbose: bool, error_prefix: str) -> None:
        verify(build_directory, "build")

    def import_module_from_library(module_name: str, path: str, is_python_module: bool) -> Any:
        verify(path, f"load of {module_name}")
        return load_library(module_name, path, is_python_module)

    cpp_extension._run_ninja_build = run_ninja_build
    cpp_extension._import_module_from_library = import_module_from_library


def judge(refused: tuple[str, ...]) -> dict[str, str]:
    """The parent's flags for the run child's refused builds (its report's `build_refused`): calls whose
    flags `build_flags` refused (`load_inline_hook`, marked `build_flags.MARK`) and builds outside the
    compile stage."""
    flags = [str(r) for r in refused if str(r).startswith(build_flags.MARK)]
    others = [str(r) for r in refused if not str(r).startswith(build_flags.MARK)]
    found = {build_flags.FLAG: "a load_inline / load call's arguments were refused: " + "; ".join(flags)[:600]} \
        if flags else {}
    if others:
        found[FLAG] = "a library was built or loaded in the run stage instead of the compile stage: " \
            + "; ".join(others)[:600]
    return found
