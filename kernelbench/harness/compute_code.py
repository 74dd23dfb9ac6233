"""Parent side: where the compute libraries linked into torch's own objects lie (MKL, oneDNN, FBGEMM, ATen's
own GEMMs inside libtorch_cpu), read from their symbol tables, so that a sample of `code_sampler` in
libtorch_cpu can be told as a GEMM's rather than a copy's or a fill's.

Why: `code_attribution` charges foreign samples to an allowed op (a fill, a copy) the calling thread was inside,
up to the op's data's time, and does not judge torch's own work between the candidate's calls (writing inputs,
holding copies for checks all run in libtorch_cpu). A hook in torch that native code installs without importing
its API (the setter found in the dynamic symbol table, as `sgemm_` is) runs MKL in either place: an allocator
hook inside a `clone` ran a matmul within the copy's budget, an op observer on the harness's `copy_` of a check's
output filled the held copy with MKL's matmul while the timed calls returned nothing. Neither the harness's
own work between calls nor any allowed op runs a GEMM (measured: none of 30 honest CPU solutions' samples
between calls fell in these ranges), so a sample in one is the candidate's compute wherever it lies.

Which objects: only files in torch's own `lib` folder (trusted: the parent never runs a tool on a file the
candidate made). Which symbols: `COMPUTE_SYMBOLS`. Not covered: ATen's elementwise and reduction kernels (a
hook could run `at::sum_out` between calls; they are the same code the harness's own input writes run), and a
torch whose libtorch_cpu carries no symbol table (stripped): `ranges_for` is then empty and the check is the
coarse one it was before (`symbol_table_present` tells which).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import importlib.util
import json
import logging
import os
import re
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

COMPUTE_SYMBOLS = re.compile(r"^(mkl_|MKL|cblas_|_ZN4dnnl|dnnl_|_ZN6fbgemm|fbgemm|nnp_|pytorch_qnnp|"
                             r"[sdcz]gemm|.*gemm|.*cpublas|.*mkldnn|.*_ZN4ideep)", re.IGNORECASE)
"""Symbol names of compute routines: MKL (statically linked into libtorch_cpu, its BLAS/LAPACK entry points and
kernels), oneDNN and ideep, FBGEMM, NNPACK/QNNPACK, and anything named for a GEMM (ATen's `cpublas` fallbacks,
the packed-GEMM kernels)."""
NM_TIMEOUT_S = 60
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ComputeRanges:
    """One object file's compute routines as merged [start, end) link-time addresses, and the page-aligned
    address and file offset of its one executable segment."""

    exec_vaddr: int
    exec_offset: int
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def holds(self, link_addr: int) -> bool:
        i = bisect.bisect_right(self.starts, link_addr) - 1
        return i >= 0 and link_addr < self.ends[i]


def torch_lib_dir() -> str:
    """torch's `lib` folder, found without importing torch ("" when torch is not installed)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return ""
    return os.path.realpath(os.path.join(os.path.dirname(spec.origin), "lib"))


def exec_segment(path: str) -> tuple[int, int] | None:
    """(page-aligned virtual address, page-aligned file offset) of the one executable PT_LOAD of a 64-bit
    little-endian ELF file (None: not such a file, or several executable segments)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            phoff, = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return None
    found = []
    for i in range(phnum):
        p_type, p_flags, p_offset, p_vaddr = struct.unpack_from("<IIQQ", table, i * phentsize)
        if p_type == 1 and p_flags & 1:  # PT_LOAD, PF_X
            found.append((p_vaddr & ~0xFFF, p_offset & ~0xFFF))
    return found[0] if len(found) == 1 else None


def _cache_file(path: str, st: os.stat_result) -> Path:
    # not under $KERNEL_AGENT_CACHE: that is the build cache's root, whose quota evicts every folder it holds
    root = Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "kernel-agent" / "compute-code"
    key = hashlib.sha256(f"{path}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{COMPUTE_SYMBOLS.pattern}".encode())
    return root / f"{key.hexdigest()[:24]}.json"


def _read_symbols(path: str) -> list[tuple[int, int]]:
    """[start, end) of every sized text symbol of `path` whose name is a compute routine's (`nm`, the static
    symbol table; [] when the file has none)."""
    done = subprocess.run(["nm", "--defined-only", "-S", "-p", path], capture_output=True, text=True,
                          timeout=NM_TIMEOUT_S, check=False)
    if done.returncode != 0 and "no symbols" not in done.stderr:  # a failing tool must not read as "no routines"
        raise RuntimeError(f"nm could not read {path} (exit {done.returncode}): {done.stderr.strip()[:300]}")
    spans = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwWi" and COMPUTE_SYMBOLS.match(parts[3]):
            start, size = int(parts[0], 16), int(parts[1], 16)
            if size:
                spans.append((start, start + size))
    return spans


def _merge(spans: list[tuple[int, int]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(spans):
        if starts and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return tuple(starts), tuple(ends)


@functools.lru_cache(maxsize=32)
def _ranges(path: str, ino: int, size: int, mtime_ns: int) -> ComputeRanges | None:
    seg = exec_segment(path)
    if seg is None:
        return None
    st = os.stat(path)
    cache = _cache_file(path, st)
    try:
        data = json.loads(cache.read_text())
        return ComputeRanges(*seg, tuple(data["starts"]), tuple(data["ends"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    starts, ends = _merge(_read_symbols(path))
    if not starts and os.path.basename(path).startswith("libtorch_cpu"):
        log.warning("%s has no static symbol table (a stripped torch): compute routines inside it cannot be told "
                    "from torch's own ops, and the check of which code ran between calls sees only the candidate's "
                    "code and other libraries (docs/harness.md, \"Compute routines inside torch\")", path)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"path": path, "starts": starts, "ends": ends}))
        os.replace(tmp, cache)
    except OSError as e:  # the ranges still hold for this process
        log.warning("compute ranges of %s not cached: %s", path, e)
    return ComputeRanges(*seg, starts, ends)


def ranges_for(path: str) -> ComputeRanges | None:
    """The compute ranges of a mapped object, when it is a file of torch's own `lib` folder (None otherwise, or
    when it cannot be read)."""
    lib = torch_lib_dir()
    real = os.path.realpath(path)
    if not lib or os.path.dirname(real) != lib:
        return None
    try:
        st = os.stat(real)
    except OSError:
        return None
    return _ranges(real, st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=1)
def harness_dirs() -> tuple[str, ...]:
    """Folders whose native code the harness's own work between calls runs: torch's package (its `lib` and its
    Python bindings), numpy's (the input sets' generator, `_pcg64` and `_multiarray_umath`) and the
    interpreter's extension modules (`lib-dynload`: `_struct`, `_ctypes`, `_json`).

    The extension modules' folder is where this interpreter finds them, not `sysconfig`'s `platstdlib`: in a
    virtual environment that names the environment's own prefix, which holds no `lib-dynload`, and the samples
    the harness's `ctypes` calls leave in `_ctypes` between calls rejected 14 and 16 of 30 honest evaluations
    there (two jobs at once), as `dynamic:work_between_calls`."""
    dirs = []
    for name in ("torch", "numpy"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(os.path.realpath(d) for d in spec.submodule_search_locations)
    for name in ("_struct", "_ctypes", "_json"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            dirs.append(os.path.dirname(os.path.realpath(spec.origin)))
    return tuple(dict.fromkeys(dirs))


@functools.lru_cache(maxsize=1)
def harness_files() -> frozenset[str]:
    """Libraries outside `harness_dirs` whose code the harness's own work between calls runs: libffi, through
    which `ctypes` calls glibc for the timed inputs' levels (`call_inputs._Scratch`: one or two samples per
    evaluation landed there, four under load, and honest solutions were rejected). libffi only passes a call on;
    what it calls is placed on its own (MKL reached through it is still a compute routine)."""
    import _ctypes  # noqa: F401 (maps libffi into this process, as the children's import of call_inputs does)

    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if os.path.basename(path).startswith("libffi.so"):
                found.add(os.path.realpath(path))
    return frozenset(found)


def harness_object(path: str) -> bool:
    """Whether a mapped file lies in one of `harness_dirs` or is one of `harness_files` (anonymous memory and
    "<...>" names never are)."""
    if not path or path.startswith(("<", "[")):
        return False
    real = os.path.realpath(path)
    return real in harness_files() or any(real.startswith(d + os.sep) for d in harness_dirs())


def symbol_table_present() -> bool:
    """Whether libtorch_cpu's compute routines can be located here (its static symbol table names some)."""
    lib = torch_lib_dir()
    r = ranges_for(os.path.join(lib, "libtorch_cpu.so")) if lib else None
    return bool(r and r.starts)


class Locator:
    """Says whether a sample's address lies in a compute routine, from the mapping it fell in ((start, end, path),
    `code_attribution._where`) and that mapping's file offset (`code_sampler.Sampled.offsets`). By the offset,
    not by where the file's lowest mapping starts: a process can take the execute right off the first pages of
    a library (`mprotect`) before its guard and shift every address read that way."""

    def __init__(self, offsets: dict[tuple[int, int, int], int]):
        self.offsets = offsets

    def is_compute(self, pid: int, row: tuple[int, int, str] | None, ip: int) -> bool:
        if row is None or not row[2] or row[2].startswith("<"):
            return False
        lo, hi, path = row
        off = self.offsets.get((pid, lo, hi))
        found = ranges_for(path) if off is not None else None
        if found is None or not found.starts:
            return False
        return found.holds(found.exec_vaddr + (off - found.exec_offset) + (ip - lo))
