"""Triton as a second kernel language: which candidates are Triton, the rules their kernels follow, how their
launches are counted, and how they are judged on a CPU.

A candidate may define `@triton.jit` kernels and launch them from `ModelNew.forward` (`kernel[grid](...)`).
On CUDA they compile (at their first launch) and run for real, and are timed like any kernel. On CPU they run
under Triton's interpreter (`TRITON_INTERPRET=1`, set in the sandboxed children's environment before Python
starts): each program of the grid runs as numpy code, so the result's correctness is checked as strictly as
any other candidate's, but its time says nothing about the kernel. Such a result carries the flag
`interpreted`, its speedup is 0 and its score is the correctness part alone (`rewards.score`).

Whether a result is interpreted is decided here, in the parent, from the device and the candidate's source
(`interpreted`): never from anything the child reports, so a candidate that flips the interpreter off in its
own process gains nothing (on a CPU-only machine a compiled Triton launch has no driver to run on anyway).

What the rules add for Triton (`check`, run by `static_checks`; see each rule's text): imports limited to
`triton` and `triton.language`; only the public launch and tuning API of `triton` (`jit`, `cdiv`,
`next_power_of_2`, `autotune`, `heuristics`, `Config`, `language`): `triton.knobs`, `triton.runtime`,
`triton.compiler` and the rest reach the interpreter switch, the driver and the compiler; a `@triton.jit`
body may only use its own locals, `tl`, other jit functions, module constants and a few builtins (under the
interpreter a kernel body is plain Python, so a call to a Python helper or to torch from inside it would run
PyTorch, or anything else, where a compiled kernel could not); and `tl.inline_asm_elementwise` is refused on
CPU (the interpreter cannot run it; on CUDA it is inline PTX, allowed as in CUDA C).
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

from kernelbench.harness.config import EvalConfig

INTERPRETED = "interpreted"
"""Flag of a result whose Triton kernels ran under the interpreter on CPU: correctness only, no speedup."""
INTERPRET_ENV = "TRITON_INTERPRET"
CACHE_ENV = "TRITON_CACHE_DIR"

TRITON_API = {"jit", "cdiv", "next_power_of_2", "autotune", "heuristics", "Config", "language", "constexpr"}
"""`triton.<name>` a candidate may use: declaring, launching and tuning kernels."""
TRITON_MODULES = ("triton", "triton.language")
"""Modules a candidate may import (and `triton.language.<sub>`, e.g. `triton.language.extra.libdevice`)."""
CPU_REFUSED_TL = {"inline_asm_elementwise"}
"""`tl.<name>` refused on CPU: the interpreter cannot run inline assembly."""
KERNEL_BUILTINS = {"range", "min", "max", "abs", "int", "float", "bool", "len", "print", "zip", "enumerate",
                   "True", "False", "None", "isinstance", "tuple"}
"""Builtins a jit body may name (Triton's frontend accepts these, or they fold at compile time)."""
STORE_CALLS = ("store", "atomic_")
"""A kernel body must call one of these (`tl.store`, `tl.atomic_add`, ...): a kernel that stores nothing
computes nothing."""

INTERPRETED_RUN_TIMEOUT_FACTOR = 3.0
"""The run stage's wall-clock limit is this many times the configured one for an interpreted candidate: the
interpreter runs every grid program as numpy code, about 1-2 µs per element and operation on one core (a
cpu-size ReLU of 4M floats: 2-7 s per call, measured), 100-1000x a compiled kernel."""


def uses_triton(src: str) -> bool:
    """Whether the candidate imports triton (in any form); False when it does not parse."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return False
    for n in ast.walk(tree):
        if isinstance(n, ast.Import) and any(a.name.split(".")[0] == "triton" for a in n.names):
            return True
        if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "triton" and not n.level:
            return True
    return False


def interpreted(src: str, device: str) -> bool:
    """Whether the candidate's kernels run under Triton's interpreter: a Triton candidate on CPU."""
    return device == "cpu" and uses_triton(src)


def judged_config(src: str, config: EvalConfig) -> EvalConfig:
    """The config an evaluation of `src` runs under. An interpreted candidate is not timed (`timing_trials=0`,
    so neither is its reference): its time is never reported, and what the timing phase checks beside the
    time (hidden check calls among the trials, the verification round on reused buffers) exists to keep a
    candidate from faking that time. Every correctness check stays as configured: the fresh input sets and
    the extra distributions, the comparison, inputs left unchanged, the traced ops and the launch count.
    Its run stage gets `INTERPRETED_RUN_TIMEOUT_FACTOR` times the limit. Idempotent: a config already without
    timing is returned as it is (a retry passes the judged config back through the compile stage)."""
    if not interpreted(src, config.device) or (config.timing_trials == 0 and not config.time_compile_baseline):
        return config
    return replace(config, timing_trials=0, timing_rounds=0, time_compile_baseline=False,
                   run_timeout_s=config.run_timeout_s * INTERPRETED_RUN_TIMEOUT_FACTOR)


def child_env(device: str, scratch: str) -> tuple[tuple[str, str], ...]:
    """Environment of a child that may import triton: the interpreter on CPU, set before Python starts (triton
    reads it when a kernel is declared); Triton's compile cache in the child's own folder on CUDA."""
    env = ((CACHE_ENV, f"{scratch}/triton-cache"),)
    return env + (((INTERPRET_ENV, "1"),) if device == "cpu" else ())


# --- static rules (run from kernelbench.harness.static_checks on its parsed source) -----------------------------

def _decorated_jit(fn: ast.AST, src: Any) -> bool:
    for d in getattr(fn, "decorator_list", []):
        target = d.func if isinstance(d, ast.Call) else d
        if (src.qualname(target) or "") == "triton.jit":
            return True
    return False


def jit_functions(src: Any) -> list[ast.FunctionDef]:
    """Module-level functions decorated with `triton.jit` (any spelling bound to it)."""
    return [n for n in src.tree.body if isinstance(n, ast.FunctionDef) and _decorated_jit(n, src)]


def defines_kernel(src: Any) -> bool:
    """Some `@triton.jit` function stores results (`tl.store` / `tl.atomic_*`)."""
    for fn in jit_functions(src):
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr.startswith(STORE_CALLS):
                return True
    return False


def _local_names(fn: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def check(src: Any) -> None:
    """Flag Triton-specific violations on `src` (a `source_scan.Source`)."""
    jit = jit_functions(src)
    jit_names = {fn.name for fn in jit}
    module_functions = {n.name for n in src.tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    constants = _constants(src)
    for n in src.nodes:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [f"{n.module}.{a.name}" for a in n.names if n.module]
            for mod in mods:
                if mod.split(".")[0] == "triton" and not _allowed_module(mod):
                    src.flag("forbidden_import", f"import of {mod}: only triton's kernel API "
                             f"({', '.join(sorted(TRITON_API))}) and triton.language", n)
        elif isinstance(n, ast.Attribute):
            q = src.qualname(n) or ""
            parts = q.split(".")
            if parts[0] == "triton" and len(parts) >= 2 and parts[1] not in TRITON_API and not _is_tl(parts):
                src.flag("forbidden_import", f"{q}: only triton's kernel API ({', '.join(sorted(TRITON_API))}) "
                         "and triton.language; the rest reaches the interpreter switch, the driver or the compiler", n)
            if _is_tl(parts) and src.device == "cpu" and set(parts) & CPU_REFUSED_TL:
                src.flag("triton_escape", f"{q}: inline assembly cannot run under the interpreter on CPU", n)
    for fn in jit:
        local = _local_names(fn)
        for n in ast.walk(fn):
            if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal)) and n is not fn:
                src.flag("triton_python_in_kernel", f"{type(n).__name__.lower()} inside @triton.jit {fn.name}: a "
                         "kernel body is Triton, not Python", n)
            if not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)) or n.id in local:
                continue
            bound = src.imports.get(n.id)
            if bound is not None:
                if bound.split(".")[0] != "triton":
                    src.flag("triton_python_in_kernel", f"{n.id} ({bound}) inside @triton.jit {fn.name}: a kernel "
                             "may only use triton.language, its arguments and other jit functions", n)
            elif n.id in jit_names:
                continue
            elif n.id in module_functions:
                src.flag("triton_python_in_kernel", f"{n.id} inside @triton.jit {fn.name} is a Python function, not "
                         "a jit kernel (under the interpreter it would run as Python in the kernel)", n)
            elif n.id not in constants and n.id not in KERNEL_BUILTINS:
                src.flag("triton_python_in_kernel", f"{n.id} inside @triton.jit {fn.name}: not an argument, a "
                         "local, a module constant or a jit function", n)


def _constants(src: Any) -> set[str]:
    """Module-level names bound only to literal numbers, strings or `tl.constexpr(...)` of them (a name
    bound to a lambda or a function would run as Python inside an interpreted kernel)."""
    values: dict[str, list[ast.expr | None]] = {}
    stores: dict[str, int] = {}
    for n in src.nodes:
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    values.setdefault(t.id, []).append(n.value)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            values.setdefault(n.target.id, []).append(n.value)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            stores[n.id] = stores.get(n.id, 0) + 1  # every binding, assignments included
    found: set[str] = set()

    def constant(node: ast.AST | None) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, str, bool)) or node.value is None
        if isinstance(node, ast.UnaryOp):
            return constant(node.operand)
        if isinstance(node, ast.BinOp):
            return constant(node.left) and constant(node.right)
        if isinstance(node, ast.Name):
            return node.id in found
        if isinstance(node, ast.Call):
            return (src.qualname(node.func) or "").endswith("language.constexpr") and not node.keywords \
                and all(constant(a) for a in node.args)
        return False

    for _ in range(3):  # constants defined from earlier constants
        for name, assigned in values.items():
            # bound only by these assignments (no loop target, augmented assignment or function arg elsewhere)
            if stores.get(name, 0) == len(assigned) and all(map(constant, assigned)):
                found.add(name)
    return found


def _allowed_module(mod: str) -> bool:
    parts = mod.split(".")
    if mod in TRITON_MODULES or mod.startswith("triton.language."):
        return True
    return len(parts) == 2 and parts[1] in TRITON_API


def _is_tl(parts: list[str]) -> bool:
    return parts[:2] == ["triton", "language"]
