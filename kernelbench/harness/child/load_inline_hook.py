"""The child's `load_inline` hook: the flags, compiler and precompiled header a candidate's build uses.

Runs inside the sandboxed compile and run children (`kernelbench.harness.child.worker`). Flag-less builds get
STANDARD_CFLAGS; a call whose flags are those of the clang PCH the parent built (`kernelbench.harness.pch`)
builds with clang and `-include-pch`; any other with the default compiler and the parent's PCH folder first
on the include path. Both children make the same choices from the same folder, so ninja finds the build's
command unchanged in the run child. Nothing here imports the parent side.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from kernelbench.harness.child import prebuild

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
    with `-fopenmp` (see `kernelbench.harness.pch.CLANG_OPENMP`). libomp keeps its workers after a parallel region, as libgomp does
    (torch's warm-up starts those); started first by the candidate they would count as its threads. The
    parallel region runs libc's `free(NULL)` in each thread: no Python callback, so no Python thread state."""
    import ctypes

    clang = clang_pch_info(pch_dir) if pch_dir else None
    if not clang or "-fopenmp" not in clang["flags"] or not clang.get("libomp"):
        return
    omp = ctypes.CDLL(clang["libomp"])  # the extension's DT_NEEDED libomp.so.5 then finds it loaded
    omp.GOMP_parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    omp.GOMP_parallel(ctypes.cast(ctypes.CDLL(None).free, ctypes.c_void_p), None, 0, 0)


def clang_pch_info(pch_dir: str) -> dict | None:
    """The clang PCH in `pch_dir` (`kernelbench.harness.pch.clang_pch_dir` writes its `build.json`): compiler, flags, .pch path; None for gcc's folder."""
    try:
        meta = json.loads(Path(pch_dir, "build.json").read_text())
        return {"cxx": str(meta["cxx"]), "flags": tuple(meta["flags"]), "pch": os.path.join(pch_dir, "extension.pch"),
                "libomp": str(meta.get("libomp") or "")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def patch_load_inline(device: str, pch_dir: str = "") -> None:
    """In a child: give flag-less builds STANDARD_CFLAGS; build a call whose flags are those of the clang PCH
    in `pch_dir` with clang and that PCH, any other with the default compiler and `pch_dir` first on the
    include path (gcc's PCH folder); and keep torch from deleting or rebuilding its own PCH in its
    (read-only) install folder. The run child makes the same choices from the same `pch_dir`, so ninja
    finds the build's command unchanged."""
    import inspect

    from torch.utils import cpp_extension

    cpp_extension._check_and_build_extension_h_precompiler_headers = lambda *a, **k: None
    cpp_extension.remove_extension_h_precompiler_headers = lambda: None
    original = cpp_extension.load_inline
    signature = inspect.signature(original)  # torch's, also through kernel_calls' wrapper (its __signature__)
    generic = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values())
    clang = clang_pch_info(pch_dir) if pch_dir and device == "cpu" else None

    @functools.wraps(original)
    def load_inline(*args, **kwargs):
        try:  # every argument by name (a positional extra_cflags too)
            call = dict(kwargs) if generic else dict(signature.bind(*args, **kwargs).arguments)
        except TypeError:
            return original(*args, **kwargs)  # let torch report the misuse
        # a wrapper that hides torch's signature: keywords only, positional arguments as given (torch 2.x:
        # extra_cflags is the 6th, extra_include_paths the 10th)
        rest = args if generic else ()
        if call.get("extra_cflags") is None and not (generic and len(args) > 5):
            call["extra_cflags"] = list(STANDARD_CFLAGS)
        call["use_pch"] = False  # torch's PCH machinery is disabled above; ours comes through the flags
        # the compile child's early build of this folder (`prebuild`) ends before torch writes its files
        prebuild.settle(call.get("build_directory") or os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR", ""),
                                                                    str(call.get("name"))))
        if clang and normal_flags(call.get("extra_cflags") or ()) == clang["flags"]:
            return _clang_load_inline(original, rest, call, clang)
        if pch_dir and not (generic and len(args) > 9):
            call["extra_include_paths"] = [pch_dir] + list(call.get("extra_include_paths") or [])
        return original(*rest, **call)

    cpp_extension.load_inline = load_inline
    run_ninja = cpp_extension._run_ninja_build

    @functools.wraps(run_ninja)
    def run_ninja_build(build_directory, verbose, error_prefix):
        failed = prebuild.failure(build_directory)  # the same files, the same commands: the same failure
        if failed is not None:
            raise RuntimeError(f"{error_prefix}: {failed}")
        return run_ninja(build_directory, verbose, error_prefix)

    cpp_extension._run_ninja_build = run_ninja_build


def _clang_load_inline(original, rest: tuple, call: dict, clang: dict):
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
        return original(*rest, **call)
    finally:
        if saved is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = saved
