"""The build cache's keys: where entries live, and what an entry is a function of (the compiled parts of a
candidate, the toolchain, and the harness's own build code).

Entries are keyed by what is compiled: the arguments of every `load_inline` / cupy `RawModule` / `RawKernel`
call, read statically with `ast` (the static checks already require literal sources), plus the toolchain
fingerprint; when that cannot be read with certainty (`compiled_parts`), by the whole file. Candidates that
differ only in Python (common in RL groups and in the adversarial suite) share one build; each distinct file
still gets its own import outcome, cached inside the entry (`kernelbench.harness.build.builder`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kernelbench.harness.build.toolchain import clang_cxx, gcc_fingerprint, interpreter_fingerprint, tool_version
from kernelbench.harness.config import EvalConfig

HARNESS_DIR = Path(__file__).resolve().parent.parent
BUILD_CODE_MODULES = ("build/build_cache.py", "build/build_tree.py", "build/builder.py", "child/build_flags.py", "build/pch.py",
                      "build/toolchain.py", "child/load_inline_hook.py", "build/prebuild.py", "child/prebuild.py")
"""The harness's files (relative to kernelbench/harness/) that decide how a candidate is built: its flags,
PCHs, `load_inline` patching, the compile child and what is brought back of its folder. A change to any of
them changes every entry's key (`build_code_hash`)."""


def cache_root(config: EvalConfig) -> Path:
    root = config.build_cache_dir or os.environ.get("KERNEL_AGENT_CACHE") or os.path.expanduser("~/.cache/kernel-agent/builds")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=1)
def build_code_hash() -> str:
    """Hash of the build code's sources (BUILD_CODE_MODULES, in that order): how the harness builds (flags,
    PCH, load_inline patching) is part of what a build's outcome depends on, so an entry made by other build
    code is never reused."""
    digest = hashlib.sha256()
    for name in BUILD_CODE_MODULES:
        digest.update(name.encode() + b"\0" + (HARNESS_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def toolchain_fingerprint(device: str) -> str:
    """Everything besides the source that decides what a build produces and what importing it does: the
    toolchain and where torch and Python's headers are (`gcc_fingerprint`), the interpreter the children
    run (`interpreter_fingerprint`: two environments sharing one cache each get their own entries), the
    build code; for CPU builds, also whether clang compiles them (`clang_cxx`), which changes the object
    code and the OpenMP runtime the library needs."""
    parts = gcc_fingerprint(device) + interpreter_fingerprint() + [f"harness={build_code_hash()}"]
    if device == "cpu" and clang_cxx():
        parts.append(f"cpu-cxx={tool_version((clang_cxx(), '--version'))} at {clang_cxx()} pch=clang-include-pch")
    return "\n".join(parts)


def source_key(src: str, device: str) -> str:
    """Hash of the whole candidate file and the toolchain: what an import outcome is a function of."""
    return hashlib.sha256((toolchain_fingerprint(device) + "\n\0\n" + src).encode()).hexdigest()[:32]


def cache_key(src: str, device: str) -> str:
    """The build entry of `src`: keyed on WHAT it compiles (`compiled_parts`) when that can be read with
    certainty, so candidates that differ only in Python share one build; else on the whole file."""
    parts = compiled_parts(src)
    if parts is None or parts == "[]":  # nothing compiled: nothing to share
        return source_key(src, device)
    text = toolchain_fingerprint(device) + "\n\0compiled\0\n" + parts
    return "c" + hashlib.sha256(text.encode()).hexdigest()[:31]


COMPILERS = {"load_inline", "RawModule", "RawKernel"}
"""Calls whose literal arguments decide a build. Any other route to a compiler (file-based `load`,
`load_library`, cupy's Elementwise/ReductionKernel, a compiler reached by alias) makes the key the whole file."""
OTHER_COMPILERS = {"load", "load_library", "ElementwiseKernel", "ReductionKernel"} | COMPILERS
KEY_IMPORTS = {"torch", "math", "typing", "functools", "itertools", "collections", "dataclasses", "numbers",
               "__future__", "cupy"}
_UNSET = object()


def compiled_parts(src: str) -> str | None:
    """Canonical JSON of every compile call in `src` (kind, positional and keyword arguments as literals, in
    source order), or None when the file could compile anything else or differently.

    Safe sharing needs: no dynamic code (exec-like builtins, getattr/setattr, dunders, private attributes,
    imports beyond the plain-kernel set), every compiler name used only as a direct call, every argument a
    literal (constants, lists, dicts, `+` and f-strings of literals, names bound exactly once to those).
    Two files with the same parts and toolchain then hand load_inline the same names, sources and flags.
    """

    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return None
    nodes = list(ast.walk(tree))
    binds: dict[str, list[ast.AST]] = {}
    for n in nodes:
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            binds.setdefault(n.id, []).append(n)
        elif isinstance(n, ast.arg):
            binds.setdefault(n.arg, []).append(n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.setdefault(n.name, []).append(n)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").split(".")[0] not in KEY_IMPORTS):
                return None
            for a in n.names:
                if isinstance(n, ast.Import) and a.name.split(".")[0] not in KEY_IMPORTS:
                    return None
                if a.name in OTHER_COMPILERS and (a.asname or a.name) != a.name:
                    return None  # a compiler under another name would escape the call scan below
                binds.setdefault(a.asname or a.name.split(".")[0], []).append(n)
    values = {n.targets[0].id: n.value for n in nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
              and isinstance(n.targets[0], ast.Name) and len(binds.get(n.targets[0].id, [])) == 1}

    def literal(node: ast.AST | None, depth: int = 0) -> Any:
        if node is None or depth > 16:
            return _UNSET
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
            return node.value
        if isinstance(node, ast.Name):
            return literal(values.get(node.id), depth + 1)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [literal(e, depth + 1) for e in node.elts]
            return _UNSET if any(i is _UNSET for i in items) else items
        if isinstance(node, ast.Dict) and None not in node.keys:
            pairs = [(literal(k, depth + 1), literal(v, depth + 1)) for k, v in zip(node.keys, node.values)]
            ok = all(isinstance(k, str) and v is not _UNSET for k, v in pairs)
            return dict(pairs) if ok else _UNSET
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = literal(node.left, depth + 1), literal(node.right, depth + 1)
            same = type(left) is type(right) and isinstance(left, (str, list))
            return left + right if same else _UNSET
        if isinstance(node, ast.JoinedStr):
            parts = [literal(v.value if isinstance(v, ast.FormattedValue) else v, depth + 1) for v in node.values]
            plain = all(isinstance(v, ast.Constant) or (v.conversion == -1 and v.format_spec is None)
                        for v in node.values if isinstance(v, (ast.Constant, ast.FormattedValue)))
            return "".join(map(str, parts)) if plain and all(isinstance(p, (str, int)) for p in parts) else _UNSET
        return _UNSET

    exec_like = {"exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr", "globals", "locals",
                 "vars", "open", "breakpoint"}
    direct = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    calls = []
    for n in nodes:
        name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""
        if isinstance(n, ast.Name) and n.id in exec_like:
            return None
        private = name.startswith("__") if isinstance(n, ast.Name) else name.startswith("_")
        if private and name not in ("__init__", "__name__"):
            return None
        if name in OTHER_COMPILERS and not (name in COMPILERS and id(n) in direct):
            return None
        if isinstance(n, ast.Call):
            fname = n.func.id if isinstance(n.func, ast.Name) else n.func.attr if isinstance(n.func, ast.Attribute) else ""
            if fname in COMPILERS:
                args = [literal(a) for a in n.args]
                kwargs = {k.arg: literal(k.value) for k in n.keywords}
                if None in kwargs or any(a is _UNSET for a in args + list(kwargs.values())):
                    return None
                calls.append([fname, args, kwargs])
    return json.dumps(calls, sort_keys=True)
