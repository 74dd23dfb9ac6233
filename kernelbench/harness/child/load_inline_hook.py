"""The child's `load_inline` hook: the flags, compiler and precompiled header a candidate's build uses.

Runs inside the sandboxed compile and run children (`kernelbench.harness.child.worker`). First, every call's
arguments are bound to torch's own signature, however they were spelled (positional, `*args`, `**kwargs`,
computed, through a renamed alias), rebuilt as plain data and checked by `kernelbench.harness.child.build_flags`; a
refused call raises `BuildFlagsRefused` before any file is written, and is recorded in `build_manifest.REFUSED`
so that the parent rejects the candidate (`dynamic:build_flags`) even when its code caught the error. Torch's
ninja step runs only inside a checked call (a candidate reaching torch's private build steps or the unwrapped
loader builds nothing). Not covered: a compiler started another way (a process: the sandbox and the static
rules), and torch's private helpers rebound by candidate code that a checked call then runs (the static
rules refuse private attributes; the run child's snapshot audit sees harness state changed). Flag-less builds get
STANDARD_CFLAGS; a call whose flags are those of the clang PCH the parent built (`kernelbench.harness.build.pch`)
builds with clang and `-include-pch`; any other with the default compiler and the parent's PCH folder first
on the include path. Both children make the same choices from the same folder, so ninja finds the build's
command unchanged in the run child. Nothing here imports the parent side beyond two standard-library-only
modules (`build_flags`, `build_manifest`).
"""

from __future__ import annotations

import ctypes
import inspect
import json
import os
from pathlib import Path
from typing import Any

from kernelbench.harness.child import build_flags, build_manifest, prebuild

# Imports inside functions: torch.utils.cpp_extension (0.16 s to import) loads only when a build needs it: a warm
# `kernel-agent eval` pays every import.

STANDARD_CFLAGS = ("-O3", "-fopenmp")
"""Flags the parent's PCH is built with, and that CPU builds without explicit flags get. `-fopenmp` is in
the set because it defines `_OPENMP`, which torch's headers test: a PCH built without it is invalid for the
OpenMP builds that most CPU kernels are (the prompts' example and the reference solutions use exactly these)."""


def normal_flags(flags: Any) -> tuple[str, ...]:
    """A call's extra_cflags as a set: without the empty strings torch drops from the command anyway,
    deduplicated and sorted (`["-O3"] * k` is `("-O3",)`), so equivalent lists share one PCH."""
    return tuple(sorted({f for f in flags if isinstance(f, str) and f.strip()}))


def start_libomp_pool(pch_dir: str) -> None:
    """In a run child, before its baseline thread count: start libomp's thread pool when the build ran clang
    with `-fopenmp` (see `kernelbench.harness.build.pch.CLANG_OPENMP`). libomp keeps its workers after a parallel region, as libgomp does
    (torch's warm-up starts those); started first by the candidate they would count as its threads. The
    parallel region runs libc's `free(NULL)` in each thread: no Python callback, so no Python thread state."""

    clang = clang_pch_info(pch_dir) if pch_dir else None
    if not clang or "-fopenmp" not in clang["flags"] or not clang.get("libomp"):
        return
    omp = ctypes.CDLL(clang["libomp"])  # the extension's DT_NEEDED libomp.so.5 then finds it loaded
    omp.GOMP_parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    omp.GOMP_parallel(ctypes.cast(ctypes.CDLL(None).free, ctypes.c_void_p), None, 0, 0)


def clang_pch_info(pch_dir: str) -> dict | None:
    """The clang PCH in `pch_dir` (`kernelbench.harness.build.pch.clang_pch_dir` writes its `build.json`): compiler, flags, .pch path; None for gcc's folder."""
    try:
        meta = json.loads(Path(pch_dir, "build.json").read_text())
        return {"cxx": str(meta["cxx"]), "flags": tuple(meta["flags"]), "pch": os.path.join(pch_dir, "extension.pch"),
                "libomp": str(meta.get("libomp") or "")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def patch_load_inline(device: str, pch_dir: str = "") -> None:
    """In a child: check every `load_inline` / `load` call's arguments (`checked`); give flag-less builds
    STANDARD_CFLAGS; build a call whose flags are those of the clang PCH in `pch_dir` with clang and that
    PCH, any other with the default compiler and `pch_dir` first on the include path (gcc's PCH folder); and
    keep torch from deleting or rebuilding its own PCH in its (read-only) install folder. The run child makes
    the same choices from the same `pch_dir`, so ninja finds the build's command unchanged."""
    from torch.utils import cpp_extension

    cpp_extension._check_and_build_extension_h_precompiler_headers = lambda *a, **k: None
    cpp_extension.remove_extension_h_precompiler_headers = lambda: None
    original, original_load = cpp_extension.load_inline, cpp_extension.load
    clang = clang_pch_info(pch_dir) if pch_dir and device == "cpu" else None
    inside = [0]  # checked calls under way: torch's ninja step runs only inside one
    check, refuse = checked, _refuse  # held before candidate code runs, as the worker holds REFUSED

    def load_inline(*args, **kwargs):
        call = check(original, "load_inline", args, kwargs)
        if call.get("extra_cflags") is None:
            call["extra_cflags"] = list(STANDARD_CFLAGS)
        call["use_pch"] = False  # torch's PCH machinery is disabled above; ours comes through the flags
        # the compile child's early build of this folder (`prebuild`) ends before torch writes its files
        prebuild.settle(call.get("build_directory") or os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR", ""),
                                                                    str(call.get("name"))))
        inside[0] += 1
        try:
            if clang and normal_flags(call.get("extra_cflags") or ()) == clang["flags"]:
                return _clang_load_inline(original, call, clang)
            if pch_dir:
                call["extra_include_paths"] = [pch_dir] + list(call.get("extra_include_paths") or [])
            return original(**call)
        finally:
            inside[0] -= 1

    def load(*args, **kwargs):
        call = check(original_load, "load", args, kwargs)
        inside[0] += 1
        try:
            return original_load(**call)
        finally:
            inside[0] -= 1

    run_ninja = cpp_extension._run_ninja_build

    def run_ninja_build(build_directory, verbose, error_prefix):
        if not inside[0]:  # torch's private steps called directly, or the unpatched loader: flags unchecked
            raise refuse("a build that did not come through load_inline or load")
        failed = prebuild.failure(build_directory)  # the same files, the same commands: the same failure
        if failed is not None:
            raise RuntimeError(f"{error_prefix}: {failed}")
        return run_ninja(build_directory, verbose, error_prefix)

    # torch's signatures for introspection; no `__wrapped__`, which would hand out the unchecked function
    for name, hook, replaced in (("load_inline", load_inline, original), ("load", load, original_load),
                                 ("_run_ninja_build", run_ninja_build, run_ninja)):
        hook.__name__ = hook.__qualname__ = name
        hook.__doc__ = replaced.__doc__
        hook.__signature__ = inspect.signature(replaced)
        setattr(cpp_extension, name, hook)


def checked(function: Any, name: str, args: tuple, kwargs: dict) -> dict:
    """The call's arguments by name, bound to torch's signature of `function` (`inspect.signature` follows
    a wrapper's `__signature__` to torch's), rebuilt as plain data and checked by `build_flags.refusal`;
    raises `BuildFlagsRefused` (recorded in `build_manifest.REFUSED`) before anything is written or built."""
    signature = inspect.signature(function)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
        raise RuntimeError(f"the harness cannot read {name}'s parameters: its flags cannot be checked")
    bound = signature.bind(*args, **kwargs)  # a TypeError as torch's own would raise, before anything runs
    try:
        call = {k: build_flags.plain(v) for k, v in bound.arguments.items()}
    except TypeError as e:
        raise _refuse(f"{name}: {e}") from None
    defaults = {k: p.default for k, p in signature.parameters.items()}
    why = build_flags.refusal(name, call, defaults)
    if why:
        raise _refuse(why)
    return call


class BuildFlagsRefused(build_manifest.BuildRefused):
    """A `load_inline` / `load` call whose arguments `build_flags` refuses; nothing was built."""


_REFUSED = build_manifest.REFUSED


def _refuse(why: str) -> BuildFlagsRefused:
    _REFUSED.append(f"{build_flags.MARK}{why}"[:600])
    return BuildFlagsRefused(f"build refused: {why}. Allowed: {build_flags.ALLOWED_TEXT}")


def _clang_load_inline(original, call: dict, clang: dict):
    """`load_inline` under clang with its PCH. `-include-pch` loads it before main.cpp, whose own
    `#include <torch/extension.h>` then stops at the header's `#pragma once`. `-fopenmp` goes on the link
    line too: clang's OpenMP code calls libomp, which the library must name (torch links without the flag,
    and gcc's code finds the libgomp torch has loaded)."""
    call["extra_cflags"] = list(call["extra_cflags"]) + ["-include-pch", clang["pch"]]
    if "-fopenmp" in clang["flags"]:
        call["extra_ldflags"] = list(call.get("extra_ldflags") or []) + ["-fopenmp"]
    saved = os.environ.get("CXX")
    os.environ["CXX"] = clang["cxx"]  # torch names $CXX in build.ninja; only this call's build
    try:
        return original(**call)
    finally:
        if saved is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = saved
