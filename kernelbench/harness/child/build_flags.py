"""Which arguments and compiler/linker flags a candidate's `load_inline` / `load` may pass: one rule set, read
by the static check (`static_checks`, from the source) and by the child's hook (`child.load_inline_hook`, from
the real call's arguments, however they were spelled). Standard library only: the sandboxed children import it.

Why: flags reach the compiler and linker outside every text rule. A define spells what the token rules refuse
(`-DKA_ASM=__asm__`, `-DX=system`), `-include`/`-I` put other headers in, `-Wl,--wrap=...` swaps the library's
functions, `-fplugin=`/`-B`/`-specs=` run other programs inside the compiler. Covers: every argument of both
functions by name (positional, keyword, `*args`, `**kwargs`, a renamed alias: the hook binds the call to
torch's own signature), each flag list entry by entry against an allowlist (`SAFE_FLAG`), the pairs whose
second entry belongs to the first (`-Xptxas -v`), and plain data only (`plain`): the checked call then runs
no candidate code that could change what was checked. Not covered: a compiler run any other way (the sandbox).
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

FLAG = "dynamic:build_flags"
"""The children's refusal's flag (the static check's is `static:build_flags`)."""
MARK = "build flags: "
"""How the children's refusals start in `build_manifest.REFUSED` (`build_manifest.judge` reads it)."""
LOAD_INLINE_KWARGS = frozenset({"name", "cpp_sources", "cuda_sources", "functions", "extra_cflags",
                                "extra_cuda_cflags", "extra_ldflags", "verbose", "with_cuda",
                                "with_pytorch_error_handling", "use_pch"})
"""Arguments a `load_inline` call may give (by position or name). Not `build_directory` (a folder the build
manifest does not watch), `extra_include_paths` (headers from anywhere), `is_python_module`, `sycl_*`."""
LOAD_KWARGS = frozenset({"name", "sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags", "verbose",
                         "with_cuda"})
"""The same for `load` (which the static check refuses outright: the candidate writes no source files)."""
FLAG_ARGUMENTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
PTXAS_OPTION = (r"(?:-v|--verbose|-O[0-3]|--?warn-on-spills|--?warn-on-local-memory-usage|-warn-spills"
                r"|-warn-lmem-usage|--?warn-on-double-precision-use|-dlcm=c[ag]|--def-load-cache=c[ag]"
                r"|--?allow-expensive-optimizations(?:=(?:true|false))?|--?maxrregcount=\d+)")
PTXAS_OPTIONS = rf"{PTXAS_OPTION}(?:,{PTXAS_OPTION})*"
"""Options nvcc hands ptxas: register and spill reports (`-v`, what people tuning kernels print), optimisation
level, cache and register limits. Never an output or input file."""
SAFE_FLAG = re.compile(
    r"-O[0-3s]?|-ffast-math|-fopenmp|-lgomp|-funroll-loops|-march=\w+|-mtune=\w+|-m(avx\w*|fma|f16c|sse\w*)"
    r"|-std=c\+\+\d\d|--use_fast_math|-use_fast_math|-arch=\w+|-gencode=?[\w,=]*|--expt-relaxed-constexpr"
    r"|--expt-extended-lambda|-lineinfo|-res-usage|--resource-usage|-maxrregcount=?\d*|\d+|-lcublas(Lt)?|-D\w+"
    rf"|(?:-Xptxas|--ptxas-options)={PTXAS_OPTIONS}")
"""Optimisation, target and language-level flags, diagnostics that only print (`-lineinfo`, `-res-usage`,
ptxas's `-v`), cuBLAS, and defines without a value (`-DNDEBUG`: a value can spell any token)."""
ALLOWED_TEXT = ("optimisation, -march/-mtune/-m<isa>, -std=c++NN, -fopenmp, --use_fast_math, -arch/-gencode, "
                "-lineinfo, -res-usage, -Xptxas/--ptxas-options with -v, -O<n>, register limits; defines without "
                "a value; -lcublas; no include paths, plugins, linker options or build folders")
PAIRED = MappingProxyType({"-Xptxas": re.compile(PTXAS_OPTIONS), "--ptxas-options": re.compile(PTXAS_OPTIONS)})
"""Flags whose value is the next entry (`["-Xptxas", "-v"]`): that entry is read as the value, never alone."""
EMPTY = (None, "", [], (), {})
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def bad_flag(entries: list[str]) -> str | None:
    """The first entry of a flag list that is not allowed, or None when all are."""
    i = 0
    while i < len(entries):
        entry = entries[i]
        if entry in PAIRED:
            value = entries[i + 1] if i + 1 < len(entries) else ""
            if not PAIRED[entry].fullmatch(value):
                return f"{entry} {value}".strip()
            i += 2
            continue
        if not SAFE_FLAG.fullmatch(entry):
            return entry
        i += 1
    return None


def plain(value: Any, depth: int = 0) -> Any:
    """`value` rebuilt from plain str, int, bool, None, lists, tuples and str-keyed dicts; raises TypeError
    for anything else (a str subclass, an iterable that yields one thing to the check and another to torch:
    either runs candidate code inside the checked call)."""
    if value is None or type(value) in (bool, int, str):
        return value
    if depth < 3 and type(value) in (list, tuple):
        return type(value)(plain(v, depth + 1) for v in value)
    if depth < 3 and type(value) is dict:
        return {plain(k, depth + 1) if type(k) is str else _refuse(k): plain(v, depth + 1) for k, v in value.items()}
    return _refuse(value)


def _refuse(value: Any) -> Any:
    raise TypeError(f"an argument of type {type(value).__name__} (plain str, lists, tuples and dicts only)")


def refusal(function: str, arguments: dict[str, Any], defaults: dict[str, Any]) -> str:
    """Why a `load_inline` / `load` call with these bound arguments (name -> plain value, as
    `inspect.Signature.bind` gives them) may not build ('' when it may). An argument outside the allowed set
    passes only with its default value (`defaults`: torch's) or an empty one."""
    allowed = LOAD_INLINE_KWARGS if function == "load_inline" else LOAD_KWARGS
    for key, value in arguments.items():
        if key not in allowed:
            if (key in defaults and value is defaults[key]) or value in EMPTY:
                continue  # not given: the default, or empty (`load_inline(name, cpp, [], [], functions)`)
            return f"{function} option {key!r} is not allowed"
        if key == "name" and not (isinstance(value, str) and IDENTIFIER.fullmatch(value)):
            return f"{function} name {value!r} is not an identifier"
        if key in FLAG_ARGUMENTS and value is not None:
            if not isinstance(value, (list, tuple)) or not all(isinstance(f, str) for f in value):
                return f"{key} must be a list of strings"
            bad = bad_flag([f.strip() for f in value if f.strip()])
            if bad is not None:
                return f"{key} entry {bad!r} is not an allowed compiler/linker flag"
    return ""
