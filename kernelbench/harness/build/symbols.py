"""The build's imports: what a candidate's compiled library asks the dynamic linker for, judged after compiling.

The static rules read the source's spelling, and C++ has many spellings for one function:
`namespace fast = at::cpu; fast::mm(a, b)` calls PyTorch's own CPU matmul around the dispatcher (invisible to
the op tracer) and matches no text pattern. Whatever the source called it, the built library names it
among its undefined dynamic symbols (`at::cpu::mm(at::Tensor const&, at::Tensor const&)`): the linker
resolves it at load time from libtorch. `check_build` reads those names from every library in the build
folder (`nm -D --undefined-only`, demangled) and rejects the ones below. Each rule is a list of patterns
over demangled names (symbol versions `@GLIBC_2.2.5` dropped), with its why, covers and not-covered.

What honest kernels import stays allowed: tensor allocation and metadata through the dispatcher
(`at::_ops::empty_like::call`), `data_ptr`, TORCH_CHECK's `c10::detail::torchCheckFail`, pybind11 and the
Python C API that load_inline's bindings use, libc and libm math, SLEEF vector math (`at::vec`), the
OpenMP runtimes (`GOMP_*`, `__kmpc_*`), the CUDA runtime and cuBLAS (an allowed link flag, `-lcublas`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kernelbench.harness.child.build_manifest import file_sha256
from kernelbench.harness.build.build_tree import BUILD_BOUNDS, TREE_TOO_LARGE, TreeTooLarge
from kernelbench.harness.protocol import Violation

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

NM_TIMEOUT_S = 30.0
"""Most seconds (wall and CPU) one `nm` may run: an honest library takes well under one."""
NM_TOTAL_S = 120.0
"""Most seconds all of one build's `nm` runs may take together; past it the build is unreadable (rejected)."""
NM_MEMORY_MB = 2048
"""nm's address-space limit: it reads the whole symbol table of a file the candidate made."""
MAX_LIBRARIES = 32
"""Most shared libraries one build may hold; more is `build:tree_too_large` before any `nm` runs. An honest
build holds one per `load_inline` call, plus Triton's launchers on CUDA (one per kernel)."""
NOBODY_UID = 65534
OPERATOR_NAMESPACES = r"at::(cpu|meta|cuda|mps|xpu|compositeexplicitautograd\w*|compositeimplicitautograd\w*)"
"""Namespaces of ATen's per-backend entry points (`at::cpu::mm`): one function per operator, called directly,
not through the dispatcher. They also hold helpers (`at::cpu::is_avx2_supported`,
`at::cuda::getCurrentCUDAStream`), so only names of ATen operators are judged there (`aten_ops`)."""


@dataclass(frozen=True)
class Rule:
    """One family of forbidden imports."""

    flag: str
    """`build:<rule>`: the result's flag."""
    what: str
    """The reason's opening words, for the agent."""
    patterns: tuple[str, ...]
    """Regexes searched in each demangled name (version suffix dropped)."""


RULES = (
    # Why: PyTorch doing the work, called so that the op tracer (a dispatch mode) never sees it; full credit
    # for PyTorch's own kernel under the strict policy. Covers: `at::native::` (the kernels themselves),
    # per-backend entry points of ATen operators (`OPERATOR_NAMESPACES`, however the source aliased the
    # namespace), `redispatch` (a call with dispatch keys of the caller's choosing), the dispatcher's own
    # API (finding and calling operators by handle). Not covered: `c10::impl::ExcludeDispatchKeyGuard`
    # (honest builds import it from torch's headers; the static rule catches its spelling), and operators
    # reached through the dispatcher (`at::_ops::X::call`: the tracer sees those).
    Rule("build:dispatch_bypass", "ATen called around the dispatcher (invisible to the op tracer)",
         (r"^at::native::", r"^at::_ops::\w+::redispatch\b", r"^c10::Dispatcher::", r"^c10::OperatorHandle\b",
          r"^c10::impl::OperatorEntry::", r"^c10::KernelFunction::", r"^torch::jit::", r"^torch::Library::")),
    # Why: a vendor library's kernel is not the candidate's (a BLAS sgemm is PyTorch's matmul by another
    # door). Covers: BLAS/LAPACK (CBLAS and Fortran names), MKL, oneDNN/mkldnn/ideep, FBGEMM, XNNPACK,
    # QNNPACK, NNPACK, cuDNN, ATen's own BLAS wrappers (`at::cuda::blas::`, `at::native::cpublas::`).
    # Not covered: cuBLAS (allowed on purpose: `-lcublas` is an allowed flag); BLAS code pasted as source
    # (that is writing the kernel).
    Rule("build:library_compute", "a vendor compute library called from the kernel",
         (r"^cblas_", r"^(cblas|lapacke?|LAPACKE)_", r"^[sdcz](gemm|gemv|ger[cu]?|axpy|dot[cu]?|scal|trsm|trmm|symm"
          r"|syrk|syr2k|hemm|herk|her2k|gemm3m|getrf|getrs|potrf|potrs|gesv|gesvd|gesdd|syevd?|heevd?|geqrf"
          r"|orgqr|trtrs)_?$", r"^(mkl|MKL|dnnl|mkldnn|xnn|qnnp|pytorch_qnnp|nnp|cudnn)_?[A-Za-z]",
          r"^(dnnl|mkldnn|ideep|fbgemm|at::cuda::blas|at::native::cpublas)::")),
    # Why: a hook into torch runs the candidate's code inside the harness's own work: an op observer
    # (`at::addGlobalCallback` with a `RecordFunctionCallback`) fired on the `addcmul` that writes the next call's
    # inputs and computed the answer there, outside every call window and timed trial (L1/10_sum_dim `correct` at
    # 8.7-9.6x); a replaced CPU allocator (`c10::SetCPUAllocator`) did the same from a deleter (L1/01_relu 12.5x),
    # or ran MKL inside an allowed copy. No kernel needs either. Covers: RecordFunction callbacks and guards,
    # the allocator setters. Not covered: the same functions reached without importing them (found in
    # libtorch's symbol table): `code_attribution`'s rule on the candidate's code, and on compute routines linked
    # into torch (`compute_code`), between calls is the backstop.
    Rule("build:torch_hooks", "a hook into torch's own ops or allocator (code that runs inside the harness's work)",
         (r"^at::(addGlobalCallback|addThreadLocalCallback|removeCallback|clearCallbacks|clearGlobalCallbacks"
          r"|clearThreadLocalCallbacks|enableRecordFunction|RecordFunctionGuard|RecordFunctionCallback"
          r"|DisableRecordFunctionGuard|ObserverContext|RecordFunction)\b",
          r"^c10::(SetCPUAllocator|SetAllocator|SetCPUCachingAllocator|SetCPUAllocatorGuard)\b")),
    # Why: the harness times one thread; extra threads or processes are parallelism the reference does not
    # get (and processes can outlive the run). Covers: every thread or process creation entry point of
    # libc (POSIX, C11, clone, fork and spawn), the C++ thread class, c10's thread pools and `at::launch`,
    # and changing the OpenMP team. Not covered: OpenMP parallel regions and `at::parallel_for` (allowed:
    # the harness fixes their thread count); the run child's RLIMIT_NPROC cap refuses new threads anyway.
    Rule("build:threads_or_processes", "threads or processes started by the kernel",
         (r"^(pthread_create|thrd_create|clone3?|__clone|fork|vfork|_Fork|__fork|posix_spawnp?|system|popen"
          r"|execv[ep]?|execl[ep]?|execvpe|fexecve|daemon|omp_set_num_threads|omp_set_dynamic|kmp_set_\w+)$",
          r"^std::thread::_M_start_thread\b", r"^std::(__\w+::)?async\b", r"^c10::(ThreadPool|TaskThreadPool\w*)\b",
          r"^c10::\w+ThreadPool\b", r"^at::(launch|intraop_launch|internal::launch\w*)\b",
          r"^at::set_num(_interop)?_threads\b")),
    # Why: the run child's folder held the job and the input sets; files and the environment are how a
    # kernel learns which call is timed, and the build stage must not reach the host. Covers: opening,
    # creating and mapping files (every libc spelling, fortified and 64-bit ones included), raw system
    # calls, sockets, the dynamic loader, the environment, C++ file streams and std::filesystem.
    # Not covered: reads through descriptors the process already holds (fd 0-2 are harmless logs).
    Rule("build:cpp_io_or_syscalls", "file, environment or system access from the kernel",
         (r"^_*(f|fd|fre|tmp)?open(at2?|64|at64|_2|64_2|at_2|at64_2|cookie|dir)?$", r"^creat(64)?$",
          r"^(mkstemps?|mkostemps?|mkdtemp|tmpfile(64)?|truncate(64)?|rename(at2?)?|(sym)?link(at)?|unlink(at)?"
          r"|rmdir|chmod|fchmod(at)?|chown|mkfifo|mknod|sendfile(64)?|name_to_handle_at|open_by_handle_at)$",
          r"^(syscall|socket|socketpair|connect|bind|listen|accept4?|ptrace|kill|tgkill|prctl|mprotect|mmap(64)?"
          r"|dlopen|dlmopen|dlsym|dlvsym|getenv|secure_getenv|setenv|putenv|unsetenv|clearenv)$",
          r"^std::basic_[io]?fstream<", r"^std::basic_filebuf<[^>]*>::open\b", r"^std::(__\w+::)?filesystem::",
          # glibc's other exported ways to open a file: the stdio internals, file-tree walks, the name-service
          # file readers, the no-cancel wrappers (`_IO_fopen` read /proc/self/status past every name above)
          r"^_*IO_\w*(open|file)\w*$", r"^_*fts(64)?_\w+$", r"^_*n?ftw(64)?$", r"^__nss_\w+$", r"^__\w+_nocancel$")),
)


@lru_cache(maxsize=1)
def aten_ops() -> frozenset[str]:
    """Base names of every ATen operator (`mm`, `add_`, `_softmax`), from the dispatcher's registry."""
    import torch

    return frozenset(n.split("::", 1)[1].split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
                     if n.startswith("aten::"))


_OPERATOR_CALL = re.compile(OPERATOR_NAMESPACES + r"::(\w+?)(_outf|_out|_symint)?\(")


def judge_symbols(names: list[str]) -> list[Violation]:
    """Violations among demangled undefined symbol names (one per flag, naming the first offender)."""
    found: dict[str, str] = {}
    ops = aten_ops()
    for raw in names:
        name = raw.split("@", 1)[0].strip()
        if name.startswith("<"):  # undefined_symbols could not read the library: never a clean build
            found.setdefault("build:unreadable_library", f"the built library could not be read: {name[:200]}")
            continue
        if raw.strip().endswith("@GLIBC_PRIVATE"):  # glibc's internals, for its own libraries only
            found.setdefault("build:cpp_io_or_syscalls", f"a glibc-internal function: {name[:200]}")
        for rule in RULES:
            if rule.flag not in found and any(re.search(p, name) for p in rule.patterns):
                found[rule.flag] = f"{rule.what}: the built library imports {name[:160]!r}"
        m = _OPERATOR_CALL.match(name)
        if m and "build:dispatch_bypass" not in found and (m.group(2) in ops or m.group(2).rstrip("_") in ops):
            found["build:dispatch_bypass"] = (f"ATen operator called through its backend entry point, around the "
                                              f"dispatcher (invisible to the op tracer): {name[:160]!r}")
    return [Violation(flag, reason) for flag, reason in found.items()]


def _nm_argv(nm: str) -> list[str]:
    """nm under limits, as `nobody` when the parent is root: nm parses a file the candidate made, and a parser
    fault must not run as root. It reads the file through `/dev/fd/N` (opened by the parent without following
    a link), so `nobody` needs no way through the cache's folders."""
    limits = ["prlimit", f"--as={NM_MEMORY_MB << 20}", f"--cpu={int(NM_TIMEOUT_S)}", "--fsize=0", "--core=0",
              "--nofile=16", "--"]
    user = ["setpriv", f"--reuid={NOBODY_UID}", f"--regid={NOBODY_UID}", "--clear-groups", "--"] \
        if os.geteuid() == 0 else []
    for tool in (limits[0], *user[:1]):
        if shutil.which(tool) is None:
            raise FileNotFoundError(f"{tool} (util-linux) is not installed; the symbol check runs nm under it")
    return user + limits + [nm, "-D", "--undefined-only", "--demangle", "--format=posix"]


def undefined_symbols(library: str, timeout_s: float = NM_TIMEOUT_S) -> list[str]:
    """Demangled names the shared library `library` imports (its undefined dynamic symbols).

    nm reads the file and prints text; nothing of the library runs. It runs under limits (`_nm_argv`, at most
    `timeout_s`). A file nm cannot read in time is reported as one pseudo-symbol that no rule allows, so an
    unreadable build is never a clean one."""
    nm = shutil.which("nm")
    if nm is None:
        raise FileNotFoundError("nm (binutils) is not installed; it comes with every C++ toolchain")
    argv = _nm_argv(nm)
    try:
        fd = os.open(library, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        return [f"<unreadable library: {e}>"]
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ["<unreadable library: not a regular file>"]
        out = subprocess.run(argv + [f"/dev/fd/{fd}"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             timeout=max(0.1, timeout_s), pass_fds=(fd,))
    except subprocess.TimeoutExpired:
        return ["<nm timed out>"]
    finally:
        os.close(fd)
    if out.returncode != 0:
        return [f"<unreadable library: {out.stderr.strip()[:200]}>"]
    # posix format: "NAME TYPE [VALUE SIZE]"; demangled names hold spaces, so the type is the last letter field
    names = []
    for line in out.stdout.splitlines():
        m = re.match(r"^(.*) [UvwVW]( |$)", line)
        if m:
            names.append(m.group(1))
    return names


def _shared_object(path: Path) -> bool:
    """Whether `path` is an ELF file the dynamic loader can map (ET_DYN), whatever it is called."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return True  # unreadable: judged (and rejected) by undefined_symbols
    return len(head) == 18 and head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little" if head[5] == 1 else "big") == 3


def libraries(build_dir: str) -> list[str]:
    """Every shared library in the build folder (regular files only, never through a link): by content, not
    by name, so a library the compile child left as `payload.bin` for a later `dlopen` is judged too.

    The walk is bounded like `build_tree.import_tree` (BUILD_BOUNDS: entries, depth, bytes), because the folder
    may have been written in place since (the plain child runs in the entry's own folder): TreeTooLarge past
    them; FileNotFoundError when `build_dir` is missing (never a clean build)."""
    found: list[str] = []
    left, size_left = BUILD_BOUNDS.max_entries, BUILD_BOUNDS.max_total_bytes
    todo = [(Path(build_dir), 0)]
    if not Path(build_dir).is_dir() or Path(build_dir).is_symlink():
        raise FileNotFoundError(f"no build folder at {build_dir}")
    while todo:
        folder, depth = todo.pop()
        if depth > BUILD_BOUNDS.max_depth:
            raise TreeTooLarge(f"the build folder is nested deeper than {BUILD_BOUNDS.max_depth} folders")
        with os.scandir(folder) as entries:
            for entry in entries:
                left -= 1
                if left < 0:
                    raise TreeTooLarge(f"the build folder holds more than {BUILD_BOUNDS.max_entries} entries")
                path = Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    todo.append((path, depth + 1))
                elif entry.is_file(follow_symlinks=False) and (path.suffix == ".so" or _shared_object(path)):
                    size_left -= entry.stat(follow_symlinks=False).st_size
                    if size_left < 0:
                        raise TreeTooLarge(f"its libraries hold more than {BUILD_BOUNDS.max_total_bytes >> 20} MB")
                    found.append(str(path))
    return sorted(found)


@lru_cache(maxsize=1)
def _rules_digest() -> str:
    """What a verdict depends on besides the libraries: these rules, torch's operator list, nm's version."""
    import torch

    nm = shutil.which("nm") or ""
    version = subprocess.run([nm, "--version"], capture_output=True, text=True, timeout=30).stdout if nm else ""
    return hashlib.sha256(Path(__file__).read_bytes() + torch.__version__.encode() + version.encode()).hexdigest()


def check_build(build_dir: str, cache_dir: str = "") -> list[Violation]:
    """Violations in the imports of every library the candidate built in `build_dir` (an entry's `ext/`).

    Bounded before nm runs: a folder over `BUILD_BOUNDS` or with more than MAX_LIBRARIES libraries is
    `build:tree_too_large`; every nm runs under limits (`undefined_symbols`) within NM_TOTAL_S in all. With
    `cache_dir` (the build cache entry), the verdict is kept there under the hash of every library's path and
    content and of the rules (`_rules_digest`), so a cache hit runs no nm; a library changed since is a new key."""
    try:
        libs = libraries(build_dir)
    except TreeTooLarge as e:
        return [Violation(TREE_TOO_LARGE, f"the build folder is over the harness's bounds: {e}")]
    if len(libs) > MAX_LIBRARIES:
        return [Violation(TREE_TOO_LARGE, f"the build folder holds {len(libs)} shared libraries (at most "
                                          f"{MAX_LIBRARIES} are judged)")]
    kept = None
    if cache_dir:
        key = json.dumps([_rules_digest()] + [[os.path.relpath(lib, build_dir), file_sha256(lib)] for lib in libs])
        kept = Path(cache_dir, "symbols", f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json")
    if kept is not None and kept.is_file():
        return [Violation(flag, reason) for flag, reason in json.loads(kept.read_text())]
    found: dict[str, Violation] = {}
    deadline = time.monotonic() + NM_TOTAL_S
    for lib in libs:
        left = deadline - time.monotonic()
        names = undefined_symbols(lib, min(NM_TIMEOUT_S, left)) if left > 0 else ["<nm time budget spent>"]
        for v in judge_symbols(names):
            found.setdefault(v.flag, Violation(v.flag, f"{v.reason} ({os.path.basename(lib)})"))
    if kept is not None:
        kept.parent.mkdir(exist_ok=True)
        tmp = kept.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps([[v.flag, v.reason] for v in found.values()]))
        os.replace(tmp, kept)  # atomic: a killed harness leaves no half-written verdict
    return list(found.values())
