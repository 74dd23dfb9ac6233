"""Precompiled headers for torch/extension.h: built by the parent, in a sandboxed child, for a fixed set of
normalised flag sets, under a size quota with eviction.

The parent has `torch/extension.h` precompiled once per toolchain and fixed flag set (`ensure_pch`; the
compiler runs in a sandboxed child, `build_pch_sandboxed`) into a folder of its own, with the flags
`load_inline` compiles `main.cpp` with (STANDARD_CFLAGS when the candidate gives none); the child's
`load_inline` puts that folder first on the include path (`kernelbench.harness.child.load_inline_hook`), and
gcc uses a .gch valid for the build's flags (else it reads the plain header). torch's own `use_pch` is not
used: it keeps one PCH in torch's install folder that any `load_inline(use_pch=False)` on the machine deletes.
Measured on 2 cores (scripts/bench_harness.py): a 10-line op's cold compile stage 44.6 s without a PCH,
27.7 s with one.

clang (`kernelbench.harness.build.toolchain.clang_cxx`) accepts only a PCH made with the build's exact flags, so each
flag set has its own (`clang_pch_dir`), named to the child through the folder `builder.build` hands it, and loaded
with `-include-pch` (`load_inline_hook.patch_load_inline`).

PCHs are built only for a fixed set of normalised flag sets (`PCH_FLAG_SETS`), in a sandboxed child, under a
size quota with eviction (`PCH_QUOTA_MB`): each is ~170 MB and a minute of compiler time.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import secrets
import sysconfig
from pathlib import Path

from kernelbench.harness.build.build_cache import compiled_parts
from kernelbench.harness.build.build_tree import BUILD_MAX_MB, BuildTreeError, copy_regular, remove_tree
from kernelbench.harness.build.cache_quota import CacheItem, evict_lru
from kernelbench.harness.build.toolchain import clang_cxx, gcc_fingerprint, libomp_path, tool_version
from kernelbench.harness.child.load_inline_hook import clang_pch_info, normal_flags, STANDARD_CFLAGS
from kernelbench.harness.isolation import sandbox

# Imports inside functions: torch.utils.cpp_extension (0.16 s to import) loads only when a build needs it: a warm
# `kernel-agent eval` pays every import.

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

PCH_FORWARDER = "#pragma once\n#include_next <torch/extension.h>\n"
"""Written beside the .gch: gcc looks for `dir/torch/extension.h.gch` before `dir/torch/extension.h`; when the
PCH does not match a build's flags it reads the header itself, which must then exist and lead to torch's."""


def pch_command(out_path: str, flags: tuple[str, ...] = STANDARD_CFLAGS, cxx: str = "") -> list[str]:
    """The command that precompiles torch/extension.h with the flags load_inline builds main.cpp with: gcc's,
    or clang's (`cxx`), which also instantiates the header's pending templates into the PCH; gcc redoes
    those in every build (measured: 8.7 s of the 22 s an include-only main.cpp takes at -O3)."""

    from torch.utils import cpp_extension

    inc = os.path.join(cpp_extension._TORCH_PATH, "include")
    return [cxx or cpp_extension.get_cxx_compiler(), "-x", "c++-header", os.path.join(inc, "torch", "extension.h"),
            "-o", out_path, "-isystem", inc, "-isystem", os.path.join(inc, "torch", "csrc", "api", "include"),
            "-isystem", sysconfig.get_path("include"), "-DTORCH_API_INCLUDE_EXTENSION_H", "-fPIC", "-std=c++20",
            *flags, *(["-fpch-instantiate-templates"] if cxx else [])]


CLANG_OPENMP = True
"""Whether `-fopenmp` builds may run clang too. Their OpenMP code runs on LLVM's libomp, which the run child
supports: (1) libomp registers itself in /dev/shm at its first parallel region and aborts when it cannot
("OMP: Error #179: Function Can't open SHM2 failed"), so the sandbox mounts a private writable /dev/shm
(kernelbench/harness/isolation/bwrap.py); (2) libomp's worker threads start on the first parallel region and stay, so
`load_inline_hook.start_libomp_pool` starts them before the run child's baseline thread count
(kernelbench/harness/child/worker.py), or the candidate would be charged with them (`dynamic:threads`).
False: `-fopenmp` builds keep gcc."""


def clang_for(flags: tuple[str, ...] | None) -> bool:
    """Whether a CPU build with these flags (`pch_flags`) runs clang with its PCH."""
    return bool(flags is not None and pch_worthy(flags) and clang_cxx()
                and (CLANG_OPENMP or "-fopenmp" not in flags))


def pch_root() -> Path:
    return Path(os.environ.get("KERNEL_AGENT_PCH_DIR") or os.path.expanduser("~/.cache/kernel-agent/pch"))


def pch_folder() -> Path:
    """This toolchain's PCH folder. Keyed by gcc's command and fingerprint only: a machine that gains clang
    keeps its gcc PCHs (CUDA builds use them); clang's live in subfolders (`clang_pch_dir`)."""
    key = hashlib.sha256(" ".join(pch_command("X", ()) + ["\n".join(gcc_fingerprint("cpu")), "gch-folder"]).encode())
    return pch_root() / key.hexdigest()[:16]


def _flags_hash(flags: tuple[str, ...]) -> str:
    return hashlib.sha256("\0".join(flags).encode()).hexdigest()[:16]


def _load_inline_params() -> list[str]:
    """load_inline's parameter names in order (they move between torch versions: 2.x added sycl_sources)."""

    from torch.utils import cpp_extension

    return list(inspect.signature(cpp_extension.load_inline).parameters)


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

    When CPU builds run clang (`clang_cxx`), clang's PCH for `flags` is built too (`clang_pch_dir`;
    `builder.build` hands the child that subfolder). `device` saves the PCH the builds will not use: "cpu" there builds only
    clang's, "cuda" only gcc's; None (a caller that does not say) builds both.
    """
    if flags is not None and not pch_worthy(flags):
        flags = None  # never a candidate's -I, -D or plugin, and a PCH only for the fixed flag sets
    flags = None if flags is None else normal_flags(flags)
    clang = clang_for(flags) and device != "cuda"
    folder = pch_folder()
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


def pch_variants(folder: Path) -> list[tuple[Path, tuple[str, ...] | None]]:
    """Every PCH in `folder` (gcc's .gch files, clang's subfolders) with its flag set when known."""
    hashes = {_flags_hash(f): f for f in PCH_FLAG_SETS}
    found: list[tuple[Path, tuple[str, ...] | None]] = []
    for gch in (folder / "torch" / "extension.h.gch").glob("*.gch"):
        found.append((gch, hashes.get(gch.stem)))
    for sub in folder.glob("clang-*"):
        meta = clang_pch_info(str(sub))
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
    (PCH_QUOTA_MB by default); never the standard flag set's nor `keep`'s. Returns the paths removed
    (`cache_quota.evict_lru`, the build cache's mechanism too)."""
    protected = {normal_flags(STANDARD_CFLAGS), normal_flags(keep)}

    def last_use(flags: tuple[str, ...] | None) -> float:
        stamp = folder / "used" / _flags_hash(flags) if flags else None
        return stamp.stat().st_mtime if stamp is not None and stamp.exists() else 0.0

    items = [CacheItem(path, _size(path), last_use(flags), flags in protected) for path, flags in pch_variants(folder)]
    return evict_lru(items, (quota_mb or PCH_QUOTA_MB) << 20, lambda item: remove_tree(item.path))


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
                copy_regular(scratch, out_name, str(tmp), BUILD_MAX_MB << 20)
            except (OSError, BuildTreeError):
                tmp.unlink(missing_ok=True)
                return False
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
            return True
        finally:
            remove_tree(scratch)


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
    sub = folder / f"clang-{_flags_hash((tool_version((clang_cxx(), '--version')), *flags))}"
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
                meta_tmp.write_text(json.dumps({"cxx": clang_cxx(), "flags": list(flags), "libomp": libomp_path()}))
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
