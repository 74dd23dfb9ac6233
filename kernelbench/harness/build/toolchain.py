"""The compilers on this machine: their versions (part of every build's key), the GPU's arch list, whether
clang with LLVM's OpenMP runtime builds CPU candidates (`clang_cxx`), and the error lines of their logs.

clang, when installed with libomp, compiles CPU builds whose flags are allowlisted (`kernelbench.harness.build.pch`):
gcc still instantiates torch's templates in every build (its PCH leaves them pending), clang's PCH holds them
(`-fpch-instantiate-templates`). Measured on 2 cores: the ReLU op's cold compile stage ~12-14 s with clang,
~26 s with gcc and its PCH. CUDA builds and other flag sets keep gcc.
"""

from __future__ import annotations

import functools
import os
import shutil
import hashlib
import inspect
import subprocess
import sys
import sysconfig
import tempfile

from kernelbench.harness.isolation import sandbox
from kernelbench.harness.child.load_inline_hook import STANDARD_CFLAGS

# Imports inside functions: optional or GPU-only libraries (pynvml, and torch.utils.cpp_extension: 0.16 s, only for
# builds) are imported only where they are used, so a machine without them runs everything else.

@functools.lru_cache(maxsize=None)
def tool_version(argv: tuple[str, ...]) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "absent"
    return " ".join(out.strip().splitlines()[-1:] if "nvcc" in argv[0] else out.strip().splitlines()[:1])


def gcc_fingerprint(device: str) -> list[str]:
    """What a build's outcome depends on besides its source and the interpreter: versions, flags, and where
    torch, Python's headers and the compiler are (`build_environment`). Keys the PCH folder too."""
    import torch

    parts = [f"torch={torch.__version__}", f"cuda={torch.version.cuda}", f"python={sys.version_info[:3]}",
             f"cxx={tool_version(('c++', '--version'))}", f"device={device}", f"cflags={' '.join(STANDARD_CFLAGS)}",
             "pch=gch-folder"]  # where builds find their PCH (the .o's dependency list names it)
    if device == "cuda":
        parts += [f"nvcc={tool_version(('nvcc', '--version'))}", f"arch={cuda_arch_list()}"]
    return parts + list(build_environment(device))


def interpreter_fingerprint() -> list[str]:
    """The interpreter the children run (`launch.child_argv`: this one): its file, its prefix and its base.

    Why: a virtual environment shares the base interpreter's file and headers but not its packages; the
    import outcome an entry caches (`imports/`) depends on what the child can import, and the children's
    PATH starts with the interpreter's folder (`sandbox.child_path`), where `c++` is looked up.
    Covers: two interpreters (the system's, a venv's) sharing one build cache, each with its own entries.
    Not covered: a change inside the same prefix (packages installed between runs) other than torch's own
    paths, which `build_environment` keys."""
    return [f"python-executable={os.path.realpath(sys.executable)}", f"python-prefix={sys.prefix}",
            f"python-base-prefix={sys.base_prefix}"]


def _guarded(what: str, compute) -> str:
    """`what=value`, or `what=unavailable (ErrorType)` when this torch cannot say (an older or newer API):
    the key then rests on the other parts, and says so."""
    try:
        return f"{what}={compute()}"
    except Exception as e:  # a moved private API of torch's: the key is coarser, never shared wrongly by this
        return f"{what}=unavailable ({type(e).__name__})"


@functools.lru_cache(maxsize=None)
def build_environment(device: str) -> tuple[str, ...]:
    """What torch writes into every `build.ninja` on this interpreter, and where it comes from: torch's own
    ninja file for a fixed probe (`torch_ninja_text`, hashed), plus the same inputs named one by one.

    Why: the run child compares the `build.ninja` torch writes for it with the one the compile stage built
    (`build_manifest`); an entry built by an interpreter whose torch lives elsewhere (same version, other
    folder) names other include and library paths, and every evaluation from the other interpreter was
    rejected (`dynamic:build_outside_compile_stage`). Deriving the key from torch's own writer covers
    inputs added by a later torch too; the named parts keep the key apart where that writer is unavailable.
    Covers: torch's location (`__file__`, include and library paths), Python's include folder, the C++ ABI,
    the compiler the children find on their PATH, and every flag torch adds.
    Not covered: headers or libraries changed in place under the same paths (same versions assumed)."""
    import torch
    from torch.utils import cpp_extension

    kind = "cuda" if device == "cuda" else "cpu"
    cxx = shutil.which("c++", path=sandbox.child_path())
    return (f"torch-file={torch.__file__}", f"torch-realpath={os.path.realpath(torch.__file__)}",
            f"python-include={sysconfig.get_path('include', scheme='posix_prefix')}",
            f"child-cxx={os.path.realpath(cxx) if cxx else 'absent'}",
            f"cxx11-abi={getattr(torch._C, '_GLIBCXX_USE_CXX11_ABI', '?')}",
            _guarded("include-paths", lambda: cpp_extension.include_paths(kind)),
            _guarded("library-paths", lambda: cpp_extension.library_paths(kind)),
            _guarded("cuda-home", lambda: cpp_extension.CUDA_HOME if kind == "cuda" else "-"),
            _guarded("torch-ninja", lambda: hashlib.sha256(torch_ninja_text(kind).encode()).hexdigest()[:16]))


PROBE_SOURCE_PATH = "/kernel-agent-probe/main.cpp"


def torch_ninja_text(kind: str) -> str:
    """The `build.ninja` torch's `load_inline` writes on this interpreter for a fixed extension (name,
    source path, STANDARD_CFLAGS), from torch's own writer; no compiler runs. CUDA: with an explicit arch
    flag, so torch never queries a GPU from the parent (rule 11: no CUDA before a fork). Raises when this
    torch's private API differs (`build_environment` records that)."""
    from torch.utils import cpp_extension

    cuda = kind == "cuda"
    args = {"path": "", "name": "kaprobe", "sources": [PROBE_SOURCE_PATH], "extra_cflags": list(STANDARD_CFLAGS),
            "extra_cuda_cflags": ["-arch=sm_80"] if cuda else [], "extra_sycl_cflags": [],
            "extra_include_paths": [], "with_cuda": cuda, "with_sycl": False, "is_standalone": False,
            "verbose": False, "extra_ldflags": []}
    writer, ldflags = cpp_extension._write_ninja_file_to_build_library, cpp_extension._prepare_ldflags
    args["extra_ldflags"] = ldflags(**{k: v for k, v in args.items() if k in inspect.signature(ldflags).parameters})
    with tempfile.TemporaryDirectory() as tmp:
        args["path"] = os.path.join(tmp, "build.ninja")
        writer(**{k: v for k, v in args.items() if k in inspect.signature(writer).parameters})
        with open(args["path"]) as f:
            return f.read()


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


OMP_PROBE = "#include <omp.h>\nint main() { return omp_get_max_threads() < 1; }\n"


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


def libomp_path() -> str:
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


ERROR_CONTEXT_LINES = 2
MAX_ERROR_LINES = 40
COMMAND_PREFIXES = ("c++ ", "g++ ", "gcc ", "nvcc ", "/usr/", "FAILED:", "[1/", "[2/", "[3/", "ninja: build stopped")


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
