"""The compile stage: a build cache keyed by source and toolchain, precompiled headers, and the child's hooks.

Compiling a candidate means importing it in a sandboxed child whose `TORCH_EXTENSIONS_DIR` is the cache
entry: `load_inline` builds there. The run child later imports the candidate again with a private copy of
the entry mounted at the same path (ninja's commands name absolute paths, so the path must not move), finds
the built library, and loads it without running ninja (`build_manifest`: only what the parent recorded
after the compile stage, file for file; any other build request there is refused). Entries are keyed by what is compiled: the arguments of every
`load_inline` / cupy `RawModule` / `RawKernel` call, read statically with `ast` (the static checks already
require literal sources), plus the toolchain fingerprint; when that cannot be read with certainty
(`compiled_parts`), by the whole file. Candidates that differ only in Python (common in RL groups and in the
adversarial suite) share one build; each distinct file still gets its own import outcome, cached inside the
entry. Compile errors are cached too, per file.

Precompiled headers: the parent has `torch/extension.h` precompiled once per toolchain and fixed flag set
(`ensure_pch`; the compiler runs in a sandboxed child, `build_pch_sandboxed`) into a folder of its own, with the flags `load_inline` compiles `main.cpp` with
(STANDARD_CFLAGS when the candidate gives none); the child's `load_inline` puts that folder first on the
include path, and gcc uses a .gch valid for the build's flags (else it reads the plain header). torch's own `use_pch` is not used: it
keeps one PCH in torch's install folder that any `load_inline(use_pch=False)` on the machine deletes.
Measured on 2 cores (scripts/bench_harness.py): a 10-line op's cold compile stage 44.6 s without a
PCH, 27.7 s with one.

clang, when installed with libomp (`clang_cxx`), compiles CPU builds whose flags are allowlisted: gcc still
instantiates torch's templates in every build (its PCH leaves them pending), clang's PCH holds them
(`-fpch-instantiate-templates`). clang accepts only a PCH made with the build's exact flags, so each flag
set has its own (`clang_pch_dir`), named to the child through the folder `build` hands it, and loaded with
`-include-pch` (`patch_load_inline`). Measured on 2 cores: the ReLU op's cold compile stage ~12-14 s with
clang, ~26 s with gcc and its PCH. CUDA builds and other flag sets keep gcc.

The build folder is the candidate's: the compile child writes it, so nothing the parent does as root may
follow a path inside it (a planted `ext/x -> /etc` would turn "remove the stale `ext/*/lock`" into a
deletion outside every sandbox). The child builds in a private folder mounted at the entry's path; the
parent then brings back regular files and folders only (`import_tree`: `lstat`, `O_NOFOLLOW`, size-bounded)
into a fresh tree it swaps in. PCHs are built only for a fixed set of normalised flag sets
(`PCH_FLAG_SETS`), in a sandboxed child, under a size quota with eviction (`PCH_QUOTA_MB`).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelbench.harness import sandbox
from kernelbench.harness.config import EvalConfig

STANDARD_CFLAGS = ("-O3", "-fopenmp")
"""Flags the parent's PCH is built with, and that CPU builds without explicit flags get. `-fopenmp` is in
the set because it defines `_OPENMP`, which torch's headers test: a PCH built without it is invalid for the
OpenMP builds that most CPU kernels are (the prompts' example and the reference solutions use exactly these)."""
PCH_FLAG_TOKENS = frozenset({"-O0", "-O1", "-O2", "-O3", "-Os", "-fopenmp", "-march=native", "-mtune=native",
                             "-ffast-math", "-funroll-loops", "-fno-math-errno", "-DNDEBUG", "-g0"})
"""Flags a candidate may build with and get a PCH made for its flag set: the parent runs the compiler with
them outside the sandbox, so only optimisation and target switches qualify; a build with any other flag (an
include path, a define, a plugin) uses whichever existing PCH gcc finds valid, or none."""
PCH_FLAG_SETS = frozenset(tuple(sorted(flags)) for flags in [
    ("-O3", "-fopenmp"), ("-O3",), ("-O2", "-fopenmp"), ("-O2",), ("-O3", "-fopenmp", "-march=native"),
    ("-O3", "-march=native"), ("-O3", "-ffast-math", "-fopenmp"), ("-O3", "-ffast-math", "-fopenmp", "-march=native")])
"""The only flag sets (`normal_flags`: deduplicated, sorted) that get a PCH of their own. Each PCH is ~170 MB
and a minute of compiler time: one per distinct flag tuple (`["-O3"] * k` for every k) would let candidates
fill the host's disk and CPU. Other allowlisted sets compile with whichever existing PCH gcc finds valid, or
none (slower, never wrong). Each set has at most one `-O` level, so sorting cannot change what a set means."""
PCH_QUOTA_MB = int(os.environ.get("KERNEL_AGENT_PCH_QUOTA_MB", "4096"))
"""Most megabytes the PCH folder may hold; past it the least recently used variants are evicted (never the
standard one, never the one just built). A build that depended on an evicted PCH is rebuilt by ninja."""
BUILD_MAX_MB = 2048
"""Most megabytes of files a compile child may leave in its build folder (brought back by `import_tree`)."""
PCH_FORWARDER = "#pragma once\n#include_next <torch/extension.h>\n"
"""Written beside the .gch: gcc looks for `dir/torch/extension.h.gch` before `dir/torch/extension.h`; when the
PCH does not match a build's flags it reads the header itself, which must then exist and lead to torch's."""
ERROR_CONTEXT_LINES = 2
MAX_ERROR_LINES = 40
COMMAND_PREFIXES = ("c++ ", "g++ ", "gcc ", "nvcc ", "/usr/", "FAILED:", "[1/", "[2/", "[3/", "ninja: build stopped")


@dataclass(frozen=True)
class BuildOutcome:
    """Result of the compile stage for one candidate."""

    status: str
    """`ok`, `compile_error`, `format_error` (no ModelNew class after import), `timeout`, `harness_error`
    (the compile child never reached the candidate's code; not cached), or `rejected` (the child's report
    pipe carried frames of the candidate's own: `dynamic:harness_tampered`; not cached)."""
    cached: bool
    """Served from the build cache (no compiler ran)."""
    compile_s: float
    """Wall time of this stage (lookup only, when cached)."""
    error_text: str
    """Trimmed compiler / import error lines for the feedback; empty when ok."""
    entry_dir: str
    """The cache entry folder; its `ext/` subfolder is TORCH_EXTENSIONS_DIR for both children."""
    sandbox: str = ""
    pch_dir: str = ""
    """The PCH folder the build used; the run child's load_inline must pass the same include path."""


def cache_root(config: EvalConfig) -> Path:
    root = config.build_cache_dir or os.environ.get("KERNEL_AGENT_CACHE") or os.path.expanduser("~/.cache/kernel-agent/builds")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=None)
def _tool_version(argv: tuple[str, ...]) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "absent"
    return " ".join(out.strip().splitlines()[-1:] if "nvcc" in argv[0] else out.strip().splitlines()[:1])


def _gcc_fingerprint(device: str) -> list[str]:
    import torch

    parts = [f"torch={torch.__version__}", f"cuda={torch.version.cuda}", f"python={sys.version_info[:3]}",
             f"cxx={_tool_version(('c++', '--version'))}", f"device={device}", f"cflags={' '.join(STANDARD_CFLAGS)}",
             "pch=gch-folder"]  # where builds find their PCH (the .o's dependency list names it)
    if device == "cuda":
        parts += [f"nvcc={_tool_version(('nvcc', '--version'))}", f"arch={cuda_arch_list()}"]
    return parts


@functools.lru_cache(maxsize=1)
def build_code_hash() -> str:
    """Hash of this module's source: how the harness builds (flags, PCH, load_inline patching) is part of what
    a build's outcome depends on, so an entry made by other build code is never reused."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def toolchain_fingerprint(device: str) -> str:
    """Everything besides the source that decides what a build produces: for CPU builds, also whether clang
    compiles them (`clang_cxx`), which changes the object code and the OpenMP runtime the library needs."""
    parts = _gcc_fingerprint(device) + [f"harness={build_code_hash()}"]  # entries only: the PCH is keyed by its command
    if device == "cpu" and clang_cxx():
        parts.append(f"cpu-cxx={_tool_version((clang_cxx(), '--version'))} pch=clang-include-pch")
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
    import ast

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


@functools.lru_cache(maxsize=1)
def cuda_arch_list() -> str:
    """`TORCH_CUDA_ARCH_LIST` for this machine's GPU (from NVML, so the parent never creates a CUDA context)."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    try:
        import pynvml

        pynvml.nvmlInit()
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(0))
        return f"{major}.{minor}"
    except Exception:  # no driver / no GPU: torch then builds for its default list
        return ""


def pch_command(out_path: str, flags: tuple[str, ...] = STANDARD_CFLAGS, cxx: str = "") -> list[str]:
    """The command that precompiles torch/extension.h with the flags load_inline builds main.cpp with: gcc's,
    or clang's (`cxx`), which also instantiates the header's pending templates into the PCH; gcc redoes
    those in every build (measured: 8.7 s of the 22 s an include-only main.cpp takes at -O3)."""
    import sysconfig

    from torch.utils import cpp_extension

    inc = os.path.join(cpp_extension._TORCH_PATH, "include")
    return [cxx or cpp_extension.get_cxx_compiler(), "-x", "c++-header", os.path.join(inc, "torch", "extension.h"),
            "-o", out_path, "-isystem", inc, "-isystem", os.path.join(inc, "torch", "csrc", "api", "include"),
            "-isystem", sysconfig.get_path("include"), "-DTORCH_API_INCLUDE_EXTENSION_H", "-fPIC", "-std=c++20",
            *flags, *(["-fpch-instantiate-templates"] if cxx else [])]


OMP_PROBE = "#include <omp.h>\nint main() { return omp_get_max_threads() < 1; }\n"
CLANG_OPENMP = True
"""Whether `-fopenmp` builds may run clang too. Their OpenMP code runs on LLVM's libomp, which the run child
supports: (1) libomp registers itself in /dev/shm at its first parallel region and aborts when it cannot
("OMP: Error #179: Function Can't open SHM2 failed"), so the sandbox mounts a private writable /dev/shm
(kernelbench/harness/sandbox.py); (2) libomp's worker threads start on the first parallel region and stay, so
`start_libomp_pool` starts them before the run child's baseline thread count (kernelbench/harness/child/worker.py), or
the candidate would be charged with them (`dynamic:threads`). False: `-fopenmp` builds keep gcc."""


def clang_for(flags: tuple[str, ...] | None) -> bool:
    """Whether a CPU build with these flags (`pch_flags`) runs clang with its PCH."""
    return bool(flags is not None and pch_worthy(flags) and clang_cxx()
                and (CLANG_OPENMP or "-fopenmp" not in flags))


@functools.lru_cache(maxsize=1)
def clang_cxx() -> str:
    """clang++ when CPU builds should use it: installed, with LLVM's OpenMP runtime (libomp-dev), and not
    turned off (KERNEL_AGENT_CPU_CXX=gcc); else '' (gcc builds them, as CUDA builds always are).

    Why: with its PCH, gcc still spends ~22 s on an -O3 main.cpp that only includes torch/extension.h
    (template instantiations left pending in the PCH, and -O3 code for pybind11's inline functions); clang
    with a PCH holding the instantiations compiles the ReLU candidate's in about half that. `-fopenmp` under
    clang needs libomp (gcc's omp.h does not parse under clang); the extension then loads libomp beside the
    libgomp torch uses, and its omp_* calls bind to libomp's (versioned symbols), checked by the probe's
    link and by tests/test_builds.py."""
    if os.environ.get("KERNEL_AGENT_CPU_CXX", "auto") == "gcc":
        return ""
    path = shutil.which("clang++", path=sandbox.child_path())
    if path is None:
        return ""
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe")
        try:
            built = subprocess.run([path, "-fopenmp", "-x", "c++", "-", "-o", probe], input=OMP_PROBE,
                                   capture_output=True, text=True, timeout=120)
            ran = built.returncode == 0 and subprocess.run([probe], capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return ""
    return path if ran else ""


def pch_root() -> Path:
    return Path(os.environ.get("KERNEL_AGENT_PCH_DIR") or os.path.expanduser("~/.cache/kernel-agent/pch"))


def _pch_folder() -> Path:
    """This toolchain's PCH folder. Keyed by gcc's command and fingerprint only: a machine that gains clang
    keeps its gcc PCHs (CUDA builds use them); clang's live in subfolders (`clang_pch_dir`)."""
    key = hashlib.sha256(" ".join(pch_command("X", ()) + ["\n".join(_gcc_fingerprint("cpu")), "gch-folder"]).encode())
    return pch_root() / key.hexdigest()[:16]


def _flags_hash(flags: tuple[str, ...]) -> str:
    return hashlib.sha256("\0".join(flags).encode()).hexdigest()[:16]


def _load_inline_params() -> list[str]:
    """load_inline's parameter names in order (they move between torch versions: 2.x added sycl_sources)."""
    import inspect

    from torch.utils import cpp_extension

    return list(inspect.signature(cpp_extension.load_inline).parameters)


def normal_flags(flags: Any) -> tuple[str, ...]:
    """A call's extra_cflags as a set: without the empty strings torch drops from the command anyway,
    deduplicated and sorted (`["-O3"] * k` is `("-O3",)`), so equivalent lists share one PCH."""
    return tuple(sorted({f for f in flags if isinstance(f, str) and f.strip()}))


def pch_worthy(flags: tuple[str, ...] | None) -> bool:
    """Whether `flags` (normalised) is one of the fixed sets that get a PCH built for them (PCH_FLAG_SETS)."""
    return flags is not None and normal_flags(flags) in PCH_FLAG_SETS


def allowed_flags(flags: tuple[str, ...]) -> bool:
    return all(f in PCH_FLAG_TOKENS for f in flags)


def pch_flags(src: str) -> tuple[str, ...] | None:
    """The flags the candidate's `load_inline` calls build `main.cpp` with (STANDARD_CFLAGS when it gives
    none, as `patch_load_inline` does), when they can be read with certainty and are all in PCH_FLAG_TOKENS;
    else None (the build then runs without a PCH made for it). Normalised (`normal_flags`), and only one of
    the fixed PCH_FLAG_SETS."""
    parts = compiled_parts(src)
    if parts is None:
        return None
    found = set()
    for kind, args, kwargs in json.loads(parts):
        if kind != "load_inline":
            continue
        flags = {**dict(zip(_load_inline_params(), args)), **kwargs}.get("extra_cflags")
        flags = STANDARD_CFLAGS if flags is None else normal_flags(flags)
        if not allowed_flags(flags):
            return None
        found.add(normal_flags(flags))
    return found.pop() if len(found) == 1 and pch_worthy(next(iter(found))) else None


def ensure_pch(flags: tuple[str, ...] | None = STANDARD_CFLAGS, device: str | None = None) -> str:
    """The folder whose `torch/extension.h.gch/` holds gcc's precompiled headers, with the PCHs for `flags`
    built now (by the trusted parent, once per toolchain and flag set); '' without a usable compiler.

    `extension.h.gch` is a folder: gcc tries every PCH in it and uses one valid for the build's flags (gcc
    manual, "Using Precompiled Headers"), so a candidate built with `-O3` alone gets a PCH as one built with
    `-O3 -fopenmp` does (measured on 2 cores: a 10-line op's compile stage 28 s with its PCH, 45 s without;
    `-fopenmp` defines `_OPENMP` and `_REENTRANT`, which torch's headers test, so one PCH cannot serve both).
    `flags=None` (flags that cannot be read or are not allowed) builds nothing new. Kept apart from torch's
    own PCH (`use_pch=True` writes one into torch's install folder, and any `load_inline(use_pch=False)` on
    the machine deletes it again). The child puts this folder first on the include path; with no valid PCH
    gcc reads the forwarding header, which leads to torch's.

    When CPU builds run clang (`clang_cxx`), clang's PCH for `flags` is built too (`clang_pch_dir`; `build`
    hands the child that subfolder). `device` saves the PCH the builds will not use: "cpu" there builds only
    clang's, "cuda" only gcc's; None (a caller that does not say) builds both.
    """
    if flags is not None and not pch_worthy(flags):
        flags = None  # never a candidate's -I, -D or plugin, and a PCH only for the fixed flag sets
    flags = None if flags is None else normal_flags(flags)
    clang = clang_for(flags) and device != "cuda"
    folder = _pch_folder()
    variants = folder / "torch" / "extension.h.gch"
    forwarder = folder / "torch" / "extension.h"
    if not forwarder.exists():
        variants.mkdir(parents=True, exist_ok=True)
        forwarder.write_text(PCH_FORWARDER)
    gcc = _ensure_gch(folder, flags) if not (clang and device == "cpu") else False
    if clang:
        clang_pch_dir(folder, flags)
    for p in [folder, folder / "torch", variants, forwarder, *variants.glob("*.gch")]:  # the sandboxed uid reads it
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    if flags is not None:
        _mark_used(folder, flags)
    return str(folder) if gcc or clang else ""


def _pch_variants(folder: Path) -> list[tuple[Path, tuple[str, ...] | None]]:
    """Every PCH in `folder` (gcc's .gch files, clang's subfolders) with its flag set when known."""
    hashes = {_flags_hash(f): f for f in PCH_FLAG_SETS}
    found: list[tuple[Path, tuple[str, ...] | None]] = []
    for gch in (folder / "torch" / "extension.h.gch").glob("*.gch"):
        found.append((gch, hashes.get(gch.stem)))
    for sub in folder.glob("clang-*"):
        meta = _clang_build(str(sub))
        found.append((sub, meta["flags"] if meta else None))
    return found


def _mark_used(folder: Path, flags: tuple[str, ...]) -> None:
    """Record that a build asked for `flags`' PCH (the eviction order). A file beside the PCHs, not the PCH
    itself: ninja would see a touched PCH as a changed input and rebuild every object that used it."""
    stamp = folder / "used" / _flags_hash(flags)
    stamp.parent.mkdir(exist_ok=True)
    stamp.touch()


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*"))


def evict_pchs(folder: Path, keep: tuple[str, ...], quota_mb: int = 0) -> list[str]:
    """Remove the least recently used PCH variants of `folder` until it holds at most `quota_mb`
    (PCH_QUOTA_MB by default); never the standard flag set's nor `keep`'s. Returns the paths removed."""
    quota = (quota_mb or PCH_QUOTA_MB) << 20
    variants = _pch_variants(folder)
    total = sum(_size(p) for p, _ in variants)
    protected = {normal_flags(STANDARD_CFLAGS), normal_flags(keep)}

    def last_use(item: tuple[Path, tuple[str, ...] | None]) -> float:
        stamp = folder / "used" / _flags_hash(item[1]) if item[1] else None
        return stamp.stat().st_mtime if stamp is not None and stamp.exists() else 0.0

    removed = []
    for path, flags in sorted(variants, key=last_use):
        if total <= quota:
            break
        if flags in protected:
            continue
        total -= _size(path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(str(path))
    return removed


def build_pch_sandboxed(command: list[str], out_name: str, dest: Path, timeout_s: float = 900.0) -> bool:
    """Run a PCH `command` (which writes `out_name` in its working folder) in a sandboxed child, then bring
    the file back to `dest` (a regular file, checked without following links). The flags are allowlisted,
    but the compiler still reads what the host's include paths hold and writes ~170 MB: the sandbox bounds
    its files, processes and time like any compile's."""
    with sandbox.SlotLease() as slot:
        scratch = sandbox.make_scratch(slot.uid, prefix="ka-pch-")
        try:
            argv = tuple(os.path.join(scratch, out_name) if a == out_name else a for a in command)
            spec = sandbox.ChildSpec(argv=argv, scratch_dir=scratch,
                                     limits=sandbox.Limits(timeout_s=timeout_s, max_processes=64,
                                                           max_file_mb=BUILD_MAX_MB))
            out = sandbox.run_child(spec, slot)
            if out.returncode != 0 or out.timed_out:
                return False
            tmp = dest.parent / f"{dest.name}.tmp{os.getpid()}-{secrets.token_hex(4)}"
            try:
                _copy_regular(scratch, out_name, str(tmp), BUILD_MAX_MB << 20)
            except (OSError, BuildTreeError):
                tmp.unlink(missing_ok=True)
                return False
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
            return True
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _ensure_gch(folder: Path, flags: tuple[str, ...] | None) -> bool:
    """gcc's PCH for `flags` in `folder` (built now if missing); False when gcc cannot use any."""
    from torch.utils import cpp_extension

    try:
        if not cpp_extension.check_compiler_is_gcc(cpp_extension.get_cxx_compiler()):
            return False  # clang's PCH format and rules differ: the default compiler runs without one
    except Exception:
        return False
    variants = folder / "torch" / "extension.h.gch"
    if flags is None:
        return True
    gch = variants / (_flags_hash(flags) + ".gch")
    if not gch.exists():
        with open(folder / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not gch.exists():
                # written beside the folder gcc searches, then moved in
                if not build_pch_sandboxed(pch_command("pch.gch", flags), "pch.gch", gch):
                    return any(variants.glob("*.gch"))
                evict_pchs(folder, flags)
    return True


_CLANG_PCH_FAILED: set[tuple[str, ...]] = set()
"""Flag sets whose clang PCH failed to build in this process: not retried for every candidate."""


def clang_pch_dir(folder: Path, flags: tuple[str, ...]) -> str:
    """The subfolder of `folder` holding clang's PCH for exactly `flags` (built now if missing), or ''.

    clang refuses a PCH made with other flags (an error, where gcc falls back to the header), so each flag
    set gets a folder of its own, whose `build.json` names the compiler and flags; the child adds
    `-include-pch` only to a call with exactly those flags (`patch_load_inline`). Only allowlisted flags
    (`pch_flags`) get here: the compiler runs outside the sandbox."""
    if not pch_worthy(flags) or not clang_cxx():
        return ""
    flags = normal_flags(flags)
    # named by compiler version too: clang rejects a PCH another version wrote, and gcc's folder key omits it
    sub = folder / f"clang-{_flags_hash((_tool_version((clang_cxx(), '--version')), *flags))}"
    meta = sub / "build.json"  # written last: its presence means the PCH beside it is complete
    if not meta.exists():
        if flags in _CLANG_PCH_FAILED:
            return ""
        sub.mkdir(parents=True, exist_ok=True)
        with open(folder / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not meta.exists():
                if not build_pch_sandboxed(pch_command("extension.pch", flags, clang_cxx()), "extension.pch",
                                           sub / "extension.pch"):
                    _CLANG_PCH_FAILED.add(flags)
                    return ""
                meta_tmp = sub / f"build.json.tmp{os.getpid()}"
                meta_tmp.write_text(json.dumps({"cxx": clang_cxx(), "flags": list(flags), "libomp": _libomp_path()}))
                os.replace(meta_tmp, meta)
                evict_pchs(folder, flags)
    for p in (sub, sub / "extension.pch", meta):  # the sandboxed uid reads them
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return str(sub)


def pch_dir_for(pch_dir: str, flags: tuple[str, ...] | None, device: str) -> str:
    """The PCH folder a build with `flags` (`pch_flags`) uses, from `ensure_pch`'s: clang's subfolder for
    them when CPU builds run clang and they are allowlisted; else `pch_dir` itself (gcc's folder)."""
    use_clang = pch_dir and device == "cpu" and clang_for(flags)
    return (clang_pch_dir(Path(pch_dir), flags) if use_clang else "") or pch_dir


def _libomp_path() -> str:
    """The OpenMP runtime file a clang `-fopenmp` library loads (read from a probe's `ldd`), or ''."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe")
        try:
            subprocess.run([clang_cxx(), "-fopenmp", "-x", "c++", "-", "-o", probe], input=OMP_PROBE,
                           capture_output=True, text=True, timeout=120, check=True)
            deps = subprocess.run(["ldd", probe], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
    found = [ln.split("=>")[1].split()[0] for ln in deps.splitlines() if "libomp" in ln and "=>" in ln]
    return os.path.realpath(found[0]) if found and os.path.isabs(found[0]) else ""


def start_libomp_pool(pch_dir: str) -> None:
    """In a run child, before its baseline thread count: start libomp's thread pool when the build ran clang
    with `-fopenmp` (see CLANG_OPENMP). libomp keeps its workers after a parallel region, as libgomp does
    (torch's warm-up starts those); started first by the candidate they would count as its threads. The
    parallel region runs libc's `free(NULL)` in each thread: no Python callback, so no Python thread state."""
    import ctypes

    clang = _clang_build(pch_dir) if pch_dir else None
    if not clang or "-fopenmp" not in clang["flags"] or not clang.get("libomp"):
        return
    omp = ctypes.CDLL(clang["libomp"])  # the extension's DT_NEEDED libomp.so.5 then finds it loaded
    omp.GOMP_parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    omp.GOMP_parallel(ctypes.cast(ctypes.CDLL(None).free, ctypes.c_void_p), None, 0, 0)


def _clang_build(pch_dir: str) -> dict | None:
    """The clang PCH in `pch_dir` (`clang_pch_dir`): compiler, flags, .pch path; None for gcc's folder."""
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
    clang = _clang_build(pch_dir) if pch_dir and device == "cpu" else None

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
        if clang and normal_flags(call.get("extra_cflags") or ()) == clang["flags"]:
            return _clang_load_inline(original, rest, call, clang)
        if pch_dir and not (generic and len(args) > 9):
            call["extra_include_paths"] = [pch_dir] + list(call.get("extra_include_paths") or [])
        return original(*rest, **call)

    cpp_extension.load_inline = load_inline


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


def extract_error_lines(text: str) -> str:
    """The compiler's `error:` lines with a little context, trimmed for the agent (falls back to the tail)."""
    # ninja echoes whole compiler command lines (thousands of characters of flags); they are noise here
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(COMMAND_PREFIXES)]
    keep: list[int] = []
    for i, line in enumerate(lines):
        if "error:" in line or "error " in line.lower()[:12] or "undefined reference" in line:
            keep.extend(range(max(0, i - ERROR_CONTEXT_LINES), min(len(lines), i + ERROR_CONTEXT_LINES + 1)))
    if not keep:
        return "\n".join(lines[-MAX_ERROR_LINES:])
    ordered = sorted(set(keep))[: MAX_ERROR_LINES]
    return "\n".join(lines[i][:300] for i in ordered)


def _read_meta(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def build(src: str, config: EvalConfig, jobs: int = 0, pch_dir: str = "") -> BuildOutcome:
    """Compile `src` (import it in a sandboxed child) unless the cache holds the result already.

    The entry (`cache_key`) holds the built extensions; the outcome of importing THIS file is recorded per
    whole-file hash inside it (`imports/`), since Python-side faults (an exit at import, no ModelNew) differ
    between files that share a build. A new file on a built entry still gets its import child, which finds
    the extension up to date (no compiler runs: `cached`)."""
    start = time.perf_counter()
    root = cache_root(config)
    key = cache_key(src, config.device)
    entry = root / key
    meta_path = entry / "imports" / f"{source_key(src, config.device)}.json"
    meta = _read_meta(meta_path)
    if meta is None:
        with open(root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker compiling the same entry: wait and reuse
            meta = _read_meta(meta_path)
            if meta is None:
                built = (entry / "built").exists()
                if not built:  # whatever a killed or failed compile left here is not trusted: build afresh
                    shutil.rmtree(entry / "ext", ignore_errors=True)
                pch_dir = pch_dir_for(pch_dir, pch_flags(src), config.device)
                meta = _compile(src, config, entry, jobs, pch_dir)
                if meta["status"] in ("ok", "compile_error", "format_error"):  # never a timeout or harness_error
                    meta_path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = meta_path.with_suffix(f".tmp{os.getpid()}")
                    tmp.write_text(json.dumps(meta))
                    os.replace(tmp, meta_path)  # atomic: a killed harness leaves no half-written verdict
                if meta["status"] == "ok":
                    (entry / "built").touch()  # last: the entry's completion marker
                return BuildOutcome(status=meta["status"], cached=built and meta["status"] == "ok",
                                    compile_s=time.perf_counter() - start, error_text=meta["error_text"],
                                    entry_dir=str(entry), sandbox=meta["sandbox"], pch_dir=meta["pch_dir"])
    return BuildOutcome(status=meta["status"], cached=True, compile_s=time.perf_counter() - start,
                        error_text=meta["error_text"], entry_dir=str(entry), sandbox=meta.get("sandbox", ""),
                        pch_dir=meta.get("pch_dir", ""))


class BuildTreeError(ValueError):
    """A build folder the child left is over its size bound (`import_tree`)."""


def _copy_regular(dir_fd: int | str, name: str, dest: str, budget: int) -> int:
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
                budget[0] -= _copy_regular(dfd, entry.name, target, budget[0])

    root = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        walk(root, dest, 0)
    finally:
        os.close(root)
    return max_bytes - budget[0]


def _swap_in(entry: Path, fresh: str) -> None:
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


COMPILE_REPORT_BYTES = 4 << 20
"""Most bytes the compile child's report pipe may carry (its import error is bounded: worker.MAX_ERROR_CHARS)."""


def _compile(src: str, config: EvalConfig, entry: Path, jobs: int, pch_dir: str) -> dict:
    """Run the compile child on a private copy of the entry's build folder, mounted at the entry's path
    (bubblewrap) or, in the plain child, the entry's own folder handed to its uid; then bring back its
    regular files into a fresh folder owned by the parent (`import_tree`) and swap that in.

    The child's outcome comes over the parent's pipe (`kernelbench.harness.report`), read once every process of the
    sandbox is dead, and must echo this job's nonce: the child imports the candidate, whose code (a thread,
    an `atexit` handler, a C++ static destructor) could rewrite a result file in its scratch folder after
    the harness wrote it. Code of the candidate can still write frames of its own into the pipe before the
    report (the run child's limit, docs/harness.md); a forged `ok` wins nothing: the run child imports the
    file again and every verdict comes from there."""
    from kernelbench.harness import protocol, report
    from kernelbench.harness.child import launch

    ext = entry / "ext"
    ext.mkdir(parents=True, exist_ok=True)
    fresh = str(entry / f"ext.new-{os.getpid()}-{secrets.token_hex(4)}")
    oversized = ""
    with sandbox.SlotLease() as slot:
        scratch = sandbox.make_scratch(slot.uid, prefix="ka-compile-")
        private = tempfile.mkdtemp(prefix="ka-build-")
        collector = report.Collector(COMPILE_REPORT_BYTES)
        try:
            if sandbox.sandbox_kind(config.require_sandbox) == sandbox.BWRAP:
                work = os.path.join(private, "ext")
                import_tree(str(ext), work)  # what earlier builds left, so a built entry is found up to date
                build_bind = sandbox.Bind(work, str(ext), writable=True)
            else:  # no mount namespace: the child writes at the entry's path, which is then treated as hostile
                work = str(ext)
                build_bind = sandbox.Bind(work, writable=True)
            sandbox.give_tree(work, slot.uid)
            nonce = secrets.token_hex(16)
            job = protocol.CompileJob(nonce=nonce, device=config.device, candidate="candidate.py", pch_dir=pch_dir,
                                      report_fd=collector.write_fd)
            Path(scratch, "candidate.py").write_text(src)
            Path(scratch, "job.json").write_text(json.dumps(protocol.job_to_dict(job)))
            spec = sandbox.ChildSpec(
                argv=launch.child_argv(scratch), scratch_dir=scratch, cuda=config.device == "cuda",
                limits=sandbox.Limits(timeout_s=config.compile_timeout_s, memory_limit_mb=0,
                                      max_processes=config.max_processes, max_file_mb=config.max_file_mb),
                binds=(build_bind,) + ((sandbox.Bind(pch_dir),) if pch_dir else ()),
                env=child_env(config, str(ext), jobs), pass_fds=(collector.write_fd,))
            child = sandbox.start_child(spec, slot, config.require_sandbox)
            collector.started()
            out = child.wait()  # returns once every process of the sandbox (and the slot's uid) is dead
            frames = collector.finish()
            tampered = frames.report_only_problem()
            result = protocol.decode_untrusted(protocol.CompileReport, frames.result(), nonce)
            try:
                import_tree(work, fresh)
                _swap_in(entry, fresh)
            except (OSError, BuildTreeError) as e:
                oversized = f"the build folder could not be brought back: {e}"
                shutil.rmtree(fresh, ignore_errors=True)
        finally:
            collector.close()
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.rmtree(private, ignore_errors=True)
    meta = {"status": "ok", "error_text": "", "sandbox": out.sandbox, "pch_dir": pch_dir}
    if not out.untrusted_ran:  # the child never reached the candidate: the harness's fault, never cached
        state = "timed out" if out.timed_out else f"exit {out.returncode}"
        where = "could not start" if not out.started else "failed in the harness's own code before the candidate ran"
        meta.update(status="harness_error", error_text=f"the compile child {where} ({state}, {out.sandbox}): "
                    f"{out.stderr_tail.strip()[-600:]}")
    elif out.timed_out:
        meta.update(status="timeout", error_text=f"compile stage exceeded {config.compile_timeout_s:.0f} s")
    elif oversized:
        meta.update(status="compile_error", error_text=oversized)
    elif tampered:  # bytes nobody but the candidate's code could have written: judged as the run child's are
        meta.update(status="rejected", error_text=f"the compile child's report channel carried {tampered}")
    elif result is not None and result.fault is None:
        return meta
    elif result is not None and result.fault.phase == "format":
        meta.update(status="format_error", error_text=result.fault.error[:2000])
    else:
        text = "\n".join([result.fault.error if result else "", out.stdout_tail, out.stderr_tail])
        if result is None:
            text = f"the compile child died (exit {out.returncode}, signal {out.signal}) without a result\n" + text
        meta.update(status="compile_error", error_text=extract_error_lines(text))
    return meta


def child_env(config: EvalConfig, extensions_dir: str, jobs: int = 0) -> tuple[tuple[str, str], ...]:
    # KMP_BLOCKTIME=0: libomp's (clang's OpenMP) workers otherwise spin for 200 ms after every parallel
    # region; that spinning is runnable time no trial accounts for, and paired timing's unaccounted-time rule
    # (paired.busiest_thread_s) read it as hidden work, rejecting an honest clang `-fopenmp` kernel as
    # `timing_inconsistent` (tests/test_builds.py). 0: they sleep at once, as libgomp's (torch's) do soon.
    env = [("TORCH_EXTENSIONS_DIR", extensions_dir), ("OMP_NUM_THREADS", str(config.threads)),
           ("KMP_BLOCKTIME", "0"), ("MAX_JOBS", str(jobs or max(1, (os.cpu_count() or 2) // 2)))]
    if config.device == "cuda" and cuda_arch_list():
        env.append(("TORCH_CUDA_ARCH_LIST", cuda_arch_list()))
    from kernelbench.harness import nvrtc, triton_kernels

    return tuple(env) + nvrtc.child_env(config.device) + triton_kernels.child_env(config.device, extensions_dir)


def run_binds(entry_dir: str, scratch: str, uid: int, kind: str, pch_dir: str = "") -> tuple[sandbox.Bind, ...]:
    """The run child's view of the build: a private writable copy mounted at the entry's path (bubblewrap),
    or the entry itself handed to the run uid (plain child: no mount namespace to relocate a copy); plus the
    PCH folder the build used, read-only, so the run child's view of the build's include paths is the
    compile child's."""
    ext = os.path.join(entry_dir, "ext")
    pch = (sandbox.Bind(pch_dir),) if pch_dir and os.path.isdir(pch_dir) else ()
    if kind != sandbox.BWRAP:
        sandbox.give_tree(ext, uid)
        return (sandbox.Bind(ext, writable=True),) + pch  # not mounted: tells run_child which paths the uid needs
    copy = os.path.join(scratch, "ext")
    # mtimes kept, so ninja finds the build up to date; torch's build baton (`NAME/lock`) stays behind: a
    # copy taken while another import holds it, or left by a killed compile, would make the run child's
    # load_inline wait on it until the run stage's timeout; links and special files stay behind too
    import_tree(ext, copy)
    sandbox.give_tree(copy, uid)
    return (sandbox.Bind(copy, ext, writable=True),) + pch


# --- compile-only: nvcc on the candidate's CUDA sources, without executing the candidate -------------

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
    import ast

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
    import ast

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
    import sysconfig

    from torch.utils import cpp_extension

    inc = os.path.join(cpp_extension._TORCH_PATH, "include")
    return ["nvcc", "-c", cu_path, "-o", obj_path, f"-arch={arch}", "-std=c++20", "-O3", "-Xcompiler", "-fPIC",
            "-I", SHIM_DIR, "-isystem", inc, "-isystem", os.path.join(inc, "torch", "csrc", "api", "include"),
            "-isystem", sysconfig.get_path("include"), "-DTORCH_EXTENSION_NAME=compile_check",
            "-DTORCH_API_INCLUDE_EXTENSION_H", *cpp_extension.COMMON_NVCC_FLAGS]


def nvcc_compile_check(src: str, timeout_s: float = 600.0, arch: str = "sm_90") -> NvccCheck:
    """Compile each CUDA source of a candidate with `nvcc -c` against torch's headers (no GPU needed);
    FileNotFoundError when the children cannot find nvcc.

    ~60 s per source on 2 cores. The CPU wheel lacks `c10/cuda/impl/cuda_cmake_macros.h`; kernelbench/harness/shims
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
                shutil.rmtree(scratch, ignore_errors=True)
        if out.timed_out:
            logs.append(f"source {i}: nvcc exceeded {timeout_s:.0f} s")
        elif out.returncode != 0:
            logs.append(f"source {i}:\n" + extract_error_lines(out.stdout_tail + "\n" + out.stderr_tail))
    return NvccCheck(not logs, len(sources), time.perf_counter() - start, "\n".join(logs))
