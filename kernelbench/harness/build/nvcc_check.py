"""Compile-only: nvcc on a candidate's CUDA sources, without executing the candidate (no GPU needed)."""

from __future__ import annotations

import ast
import os
import shutil
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from kernelbench.harness.build.build_tree import remove_tree
from kernelbench.harness.build.toolchain import extract_error_lines
from kernelbench.harness.isolation import sandbox

# Imports inside functions: torch.utils.cpp_extension (0.16 s to import) loads only when a build needs it: a warm
# `kernel-agent eval` pays every import.

SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shims")
LOAD_INLINE_CUDA_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"


@dataclass(frozen=True)
class NvccCheck:
    """Outcome of `nvcc_compile_check`."""

    ok: bool
    sources: int
    """How many CUDA source strings were found and compiled."""
    wall_s: float
    log: str
    """Trimmed compiler errors, or why nothing was compiled."""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _string_value(node, names: dict) -> str | None:
    """The text of a literal string expression: constants, names bound to them, `+`, f-strings of those."""

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return _string_value(names[node.id], names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_value(node.left, names), _string_value(node.right, names)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_string_value(v.value if isinstance(v, ast.FormattedValue) else v, names) for v in node.values]
        return None if any(p is None for p in parts) else "".join(parts)
    if isinstance(node, (ast.List, ast.Tuple)):
        parts = [_string_value(e, names) for e in node.elts]
        return None if any(p is None for p in parts) else "\n".join(parts)
    return None


def extract_cuda_sources(src: str) -> list[str]:
    """The `cuda_sources` texts of every `load_inline` call, read with `ast` (the candidate never runs)."""

    tree = ast.parse(src)
    names = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        fname = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if fname != "load_inline":
            continue
        arg = next((k.value for k in call.keywords if k.arg == "cuda_sources"), None)
        if arg is None and len(call.args) > 2:
            arg = call.args[2]
        text = _string_value(arg, names) if arg is not None else None
        if text:
            found.append(text)
    return found


def nvcc_command(cu_path: str, obj_path: str, arch: str = "sm_90") -> list[str]:
    from torch.utils import cpp_extension

    inc = os.path.join(cpp_extension._TORCH_PATH, "include")
    return ["nvcc", "-c", cu_path, "-o", obj_path, f"-arch={arch}", "-std=c++20", "-O3", "-Xcompiler", "-fPIC",
            "-I", SHIM_DIR, "-isystem", inc, "-isystem", os.path.join(inc, "torch", "csrc", "api", "include"),
            "-isystem", sysconfig.get_path("include"), "-DTORCH_EXTENSION_NAME=compile_check",
            "-DTORCH_API_INCLUDE_EXTENSION_H", *cpp_extension.COMMON_NVCC_FLAGS]


def nvcc_compile_check(src: str, timeout_s: float = 600.0, arch: str = "sm_90") -> NvccCheck:
    """Compile each CUDA source of a candidate with `nvcc -c` against torch's headers (no GPU needed);
    FileNotFoundError when the children cannot find nvcc.

    ~60 s per source on 2 cores. The CPU wheel lacks `c10/cuda/impl/cuda_cmake_macros.h`; kernelbench/harness/build/shims
    provides it. The source is handed to nvcc as text: nvcc runs sandboxed like any compile of candidate text.
    """
    if shutil.which("nvcc", path=sandbox.child_path()) is None:
        # no compiler is a fault of the machine, not a failed compile of the candidate
        raise FileNotFoundError("nvcc (the CUDA toolkit) is not on PATH or in $CUDA_HOME/bin")
    start = time.perf_counter()
    try:
        sources = extract_cuda_sources(src)
    except SyntaxError as e:
        return NvccCheck(False, 0, 0.0, f"syntax error on line {e.lineno}: {e.msg}")
    if not sources:
        return NvccCheck(False, 0, 0.0, "no literal cuda_sources passed to load_inline were found")
    logs = []
    for i, text in enumerate(sources):
        with sandbox.SlotLease() as slot:
            scratch = sandbox.make_scratch(slot.uid, prefix="ka-nvcc-")
            try:
                cu = os.path.join(scratch, f"source{i}.cu")
                Path(cu).write_text(LOAD_INLINE_CUDA_PRELUDE + text)
                spec = sandbox.ChildSpec(argv=tuple(nvcc_command(cu, os.path.join(scratch, f"source{i}.o"), arch)),
                                         scratch_dir=scratch, limits=sandbox.Limits(timeout_s=timeout_s))
                out = sandbox.run_child(spec, slot)
            finally:
                remove_tree(scratch)
        if out.timed_out:
            logs.append(f"source {i}: nvcc exceeded {timeout_s:.0f} s")
        elif out.returncode != 0:
            logs.append(f"source {i}:\n" + extract_error_lines(out.stdout_tail + "\n" + out.stderr_tail))
    return NvccCheck(not logs, len(sources), time.perf_counter() - start, "\n".join(logs))
