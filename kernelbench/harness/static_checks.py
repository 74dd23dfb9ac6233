"""Static policy checks: read a candidate's source and its embedded C++/CUDA text; never execute it.

Candidates are adversarial: an RL policy is rewarded for whatever the harness accepts, so every shortcut the
field has seen gets learned (Kevin-32B, arXiv 2507.11948: try/except fallbacks to PyTorch,
`class ModelNew(Model): pass`, copying the reference; KernelBench, arXiv 2502.10517, and its v0.1 checker:
timer patching, side streams, threads, lazy tensor subclasses). Each rule below states why it exists, what it
covers and what it leaves to the sandbox or to the dynamic checks (`op_policy`, `kernel_calls`).

The design choice that makes text rules meaningful: the C++/CUDA source handed to the compiler must be
literal text in the candidate (string literals, `+` and f-strings of literals and constants). Sources built
by calls (`"".join`, `chr`, decoding) are rejected, so what the regexes read is what the compiler reads.
Not covered by any static rule: C++ raw string literals used to confuse comment stripping, macros spelled
through the compiler's predefined names, and anything the dynamic checks exist for (PyTorch compute ops
called from C++, kernels defined but never run). The sandbox bounds what escapes all of these.

`check_source` returns rejections; `source_warnings` returns notes that do not reject (precision).
A syntax error returns no violation: the harness reports it as `format_error` itself.
How the source is read (its tree, name bindings, literal text, kernel calls): `kernelbench.harness.source_scan`.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re

from kernelbench.harness.build import triton_kernels
from kernelbench.harness.child import build_flags
from kernelbench.harness.protocol import Violation
from kernelbench.harness.source_scan import has_function_body, kernel_sources, last_name, Source, strip_c_comments

# Imports inside functions: torch.utils.cpp_extension (0.16 s to import) loads only when a build needs it: a warm
# `kernel-agent eval` pays every import.


# Allowlist, not a denylist: a denylist loses to the first module nobody thought of (ctypes, importlib,
# _posixsubprocess...). These cover what KernelBench solutions need; cupy only where kernels are CUDA.
ALLOWED_IMPORTS = {"torch", "math", "typing", "functools", "itertools", "collections", "dataclasses",
                   "numbers", "__future__", "triton"}
"""`triton`: only its kernel API and `triton.language` (`kernelbench.harness.build.triton_kernels.check`)."""
CUDA_ONLY_IMPORTS = {"cupy"}
PROCESS_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "subprocess",
                   "torch.multiprocessing", "torch.distributed"}
# Forbidden modules are also reachable as attributes of allowed ones (`torch.os.system`, `torch.sys.modules`).
FORBIDDEN_ATTRS = {"os", "sys", "subprocess", "ctypes", "importlib", "builtins", "socket", "shutil", "signal",
                   "pickle", "threading", "multiprocessing", "_thread", "inspect", "gc", "pathlib", "time"}
# Compiled graphs run generated kernels the op tracer does not see as aten ops, so `strict` would pass
# PyTorch computing the whole answer; torch.library registers ops whose inner calls the tracer cannot see.
COMPILER_APIS = ("torch.compile", "torch.jit", "torch.fx", "torch.export", "torch.library",
                 "torch.ops.load_library", "torch.classes")
CACHE_APIS = {"functools.lru_cache", "functools.cache", "functools.cached_property"}
# torch reads and writes files too: the run child's folder holds the job and every input set, from which
# a candidate could tell the verification round's exact inputs from the scaled timed ones.
TORCH_FILE_APIS = ("torch.load", "torch.save", "torch.serialization", "torch.hub", "torch.utils.cpp_extension.load",
                   "torch.utils.model_zoo", "torch.utils.data", "torch.utils.tensorboard", "torch.package")
EXEC_BUILTINS = {"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "open", "breakpoint",
                 "input", "exit", "quit"}
ALLOWED_DUNDERS = {"__init__", "__name__"}
# Frames, tracebacks, generators and coroutines lead up the call stack without `sys` or a dunder: from
# `forward`, `gen.gi_frame.f_back.f_back...f_locals` is the harness's timing loop and its list of trial
# times (a candidate that rewrote it reported 20000x with correct outputs).
FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "f_lasti", "f_lineno",
               "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "cr_frame", "cr_code", "cr_await", "cr_origin",
               "ag_frame", "ag_code", "ag_await", "tb_frame", "tb_next", "tb_lasti", "tb_lineno"}
PRECISION_ATTRS = {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
                   "fp32_precision", "set_float32_matmul_precision"}
GLOBAL_SETTERS = {"set_default_dtype", "set_default_device", "set_default_tensor_type", "set_flush_denormal",
                  "use_deterministic_algorithms", "set_stream", "set_device"}
STREAM_APIS = {"torch.cuda.Stream", "torch.Stream", "torch.cuda.ExternalStream", "torch.cuda.stream",
               "torch.cuda.set_stream", "cupy.cuda.Stream", "cupy.cuda.ExternalStream"}
LAZY_NAMES = {"__torch_function__", "__torch_dispatch__", "_make_subclass", "_make_wrapper_subclass", "as_subclass",
              "TorchDispatchMode", "TorchFunctionMode"}
# (flag, pattern, what it is, devices). Read against C/C++ text with comments removed.
BINDING_HELPERS = (r"(?:arg(?:_v)?|call_guard|gil_scoped_release|return_value_policy|kw_only|pos_only)\b"
                   r"|module_?\b(?!\s*::)")
"""pybind11 names that only describe a binding (`python_objects` lets them pass after `py::`/`pybind11::`):
argument names and defaults, releasing the GIL around the call, return-value policies, and `module_` as the
type `m.def` registers on (never `module_::import`, which reaches any Python module)."""
_CPP_RULES = [
    ("threads_or_processes", r"std::j?thread\b|std::async\b|\bpthread_create\b|\b_?_?v?[fF]ork\s*\(|\bsystem\s*\("
     r"|\bpopen\s*\(|\bexec(l|lp|le|v|vp|vpe|ve)\s*\(|\bposix_spawn|\bomp_set_num_threads\b|\bnum_threads\s*\("
     r"|(at|torch)::set_num(_interop)?_threads|#\s*include\s*<(thread|threads\.h|future|pthread\.h)>"
     r"|\bthrd_create\b|(?<![\w.>:])(::\s*)?clone[23]?\s*\(|\bc10::(TaskThreadPool|ThreadPool\w*)\b|\bat::launch\b"
     r"|\bat::internal::launch\w*|\bunshare\s*\(",
     "threads or processes in C++ (timing counts one thread; OpenMP pragmas without num_threads are fine)", "*"),
    ("cpp_io_or_syscalls", r"\b_*(f|fd|fre|tmp)?open(at2?|64|at64|_2|cookie|_memstream|dir)?\s*\(|\bcreat(64)?\s*\("
     r"|(?<![\w.>])(mkstemps?|mkostemps?|mkdtemp|tmpfile(64)?|truncate(64)?|rename(at2?)?|(sym)?link(at)?|mkfifo"
     r"|mknod)\s*\(|\bname_to_handle_at\b|\bopen_by_handle_at\b|\bsendfile(64)?\b|\bsocket\s*\(|\b(secure_)?getenv\b|\b(set|put)env\b"
     r"|\b_*IO_\w*(open|file)\w*\s*\(|\b_*fts(64)?_\w+\s*\(|\b__nss_\w+|\b__\w+_nocancel\b"
     r"|\bdl(open|sym)\b|\bsyscall\b|\bsysenter\b|\bint\s+\$?0x80\b|\bmmap\b|\bmprotect\b|\bptrace\b|/proc/"
     r"|/dev/|/sys/|\b[io]?fstream\b|\bFILE\s*\*|\bstd::filesystem\b|\b(unlink|rmdir|chmod|kill)\s*\("
     r"|\b(set|long)jmp\b|#\s*include\s*<(unistd\.h|dlfcn\.h|fcntl\.h|fstream|sys/\w+\.h|sched\.h|signal\.h"
     r"|csignal|filesystem|setjmp\.h|csetjmp)>", "file, environment or system access in C++", "*"),
    ("cpp_io_or_syscalls", r"\b(asm|__asm__|__asm)\b", "inline assembly in a CPU kernel", "cpu"),
    ("cpp_io_or_syscalls", r"\b(torch|at)::(from_file|load|save|pickle_load|pickle_save)\b|\bcaffe2::serialize\b",
     "file access through torch in C++", "*"),
    # hooks that run the candidate's code inside the harness's own ops (build/symbols.py: `build:torch_hooks`)
    ("dispatch_bypass", r"\b(add(Global|ThreadLocal)Callback|RecordFunction\w*|Set(CPU)?Allocator|SetCPUCachingAllocator)\b",
     "a hook into torch's own ops or allocator in C++", "*"),
    ("dynamic_code", r"##|\bPy(Run|Import|Eval)_\w+|\bPy_CompileString\b|\bPyObject_SetAttr\w*"
     r"|\b(py|pybind11)::(exec|eval|globals|setattr)\b|\b(py|pybind11)::module_?::import\b",
     "C++ that runs Python or pastes tokens (reaches past the Python checks)", "*"),
    # The Python C API and pybind11's object API reach the interpreter's frames and objects from C++: the
    # timing loop's list of trial times is one `PyFrame_GetBack` away from the kernel call. A kernel needs
    # neither. Binding it is another matter: load_inline writes the bindings (`functions=`), or the candidate
    # writes its own `PYBIND11_MODULE` with the helpers that only describe a binding (`BINDING_HELPERS`:
    # argument names, `call_guard<gil_scoped_release>` around a kernel, return-value policies, the `module_`
    # that `m.def` registers on); those touch no object, so they pass. A module's `::import` does not.
    ("python_objects", r"\b_?Py[A-Z][A-Za-z]*_[A-Za-z]\w*|\bPy_[A-Z]\w*|\bPy(Object|FrameObject|ThreadState"
     r"|CodeObject|TypeObject|InterpreterState)\b|\bTHP[A-Z]\w*|\b(py|pybind11)::(?!" + BINDING_HELPERS + r")\w+"
     r"|\.\s*attr\s*\(|::\s*import\s*\(|\busing\s+namespace\s+(py|pybind11)\b",
     "C++ that handles Python objects (the interpreter, its frames, the harness's state)", "*"),
    ("dispatch_bypass", r"\bat::native::|\bnamespace\s+native\b|_ZN2at|\bat::(cpu|meta|composite\w*)::"
     r"|\bat::cuda::(?!(current_device|device_count|warp_size|is_available)\b)[a-z][a-z0-9_]*\s*\(|\bredispatch\b"
     r"|\bDispatchKey|\bAutoDispatchBelow\w*|\bc10::impl::|\bDispatcher\b|\bOperatorHandle\b|\bcallBoxed\b"
     r"|\bTORCH_LIBRARY\w*|\btorch::jit::", "ATen called around the dispatcher, invisible to the op tracer", "*"),
    ("precision_downgrade", r"\bsetAllow(TF32|FP16|BF16)\w*|\bsetFloat32MatmulPrecision\b",
     "global reduced-precision switch (also changes the reference's math)", "*"),
    ("timer_or_torch_patching", r"\bglobalContext\s*\(\s*\)\s*\.\s*set\w+", "writes ATen's global context", "*"),
    ("side_streams", r"\bcu(da)?StreamCreate\w*|\bgetStreamFrom(Pool|External)\b|\bcudaStreamPerThread\b"
     r"|<<<[^<>;]*,[^<>;]*,[^<>;]*,\s*(\(\s*cudaStream_t\s*\)\s*)?[1-9]",
     "work on a non-current stream (CUDA events time only the current stream)", "*"),
]
_WARN_CPP = (r"\b__half2?\b|\b__nv_bfloat16\w*\b|\b__float2(half|bfloat16)\w*|\bat::k(Half|BFloat16)\b"
             r"|\btorch::k(Half|Float16|BFloat16)\b|\bCUBLAS_(TF32_TENSOR_OP_MATH|COMPUTE_32F_FAST_\w+)\b")
_WARN_PY = {"half", "bfloat16", "float16"}


def _rule_no_custom_kernel(src: Source) -> None:
    """Why: the task is to write kernels; a forward built from PyTorch ops scores the reference's own speed
    (Kevin-32B gave 0 reward to responses without inline CUDA). Covers: some load_inline call whose C++ has a
    function body with a statement (cpu), or CUDA text with `__global__` via load_inline or cupy RawModule/
    RawKernel (cuda). `load(sources=files)` does not count: the candidate cannot write files. Not covered:
    whether that kernel runs (`dynamic:kernel_not_called`) or does the work (`dynamic:torch_compute_op`)."""
    has_kernel = False
    for call, kind, args in kernel_sources(src):
        texts = [src.fold(a) for a in args]
        if any(t is None for t in texts):
            src.flag("dynamic_code", f"{kind} source must be literal text, not computed", call)
            continue
        text = strip_c_comments("\n".join(texts))
        if src.device == "cuda":
            cuda_text = strip_c_comments(texts[-1] or "") if kind == "load_inline" else text
            has_kernel |= "__global__" in cuda_text
        else:
            has_kernel |= kind == "load_inline" and has_function_body(strip_c_comments(texts[0] or ""))
        if kind == "load_inline":
            _check_build_options(src, call)
    has_kernel = has_kernel or triton_kernels.defines_kernel(src)
    if not has_kernel:
        need = "a __global__ CUDA kernel compiled with load_inline(cuda_sources=...) or cupy.RawModule" \
            if src.device == "cuda" else "a C++ function compiled with load_inline(cpp_sources=...)"
        src.flag("no_custom_kernel", f"no custom kernel found: ModelNew needs {need}, or a @triton.jit kernel "
                 "that stores its results")


def _check_build_options(src: Source, call: ast.Call) -> None:
    """`build_flags`' rules on every argument of a `load_inline` call, positional ones bound to torch's own
    parameter names; `*args` and `**kwargs` hide which argument is which, so they are refused (the child's
    hook binds the real call and holds without this check). Why, what it covers and what it does not:
    `kernelbench.harness.child.build_flags`."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        src.flag("build_flags", "load_inline arguments must be spelled out (no *args or **kwargs)", call)
        return
    params = load_inline_params() if call.args else ()  # imports torch: only for positional arguments
    named = [(params[i] if i < len(params) else f"argument {i + 1}", a) for i, a in enumerate(call.args)]
    for key, node in named + [(k.arg, k.value) for k in call.keywords]:
        if key not in build_flags.LOAD_INLINE_KWARGS:
            if (isinstance(node, ast.Constant) and node.value is None) or src.fold(node) == "":
                continue  # not given: None, or empty (`load_inline(name, cpp, [], [], functions)`)
            src.flag("build_flags", f"load_inline option {key!r} is not allowed", call)
        elif key == "name" and src.fold(node) is not None and not build_flags.IDENTIFIER.fullmatch(src.fold(node)):
            src.flag("build_flags", "load_inline name must be an identifier", call)  # computed: the hook reads it
        elif key in build_flags.FLAG_ARGUMENTS:
            flags = src.fold(node)
            entries = ["<computed>"] if flags is None else [f.strip() for f in flags.split("\n") if f.strip()]
            bad = build_flags.bad_flag(entries)
            if bad is not None:
                src.flag("build_flags", f"{key} entry {bad!r} is not an allowed compiler/linker flag", call)


@functools.cache
def load_inline_params() -> tuple[str, ...]:
    """torch's `load_inline` parameter names in order (they move between versions: 2.x added `sycl_sources`)."""

    from torch.utils import cpp_extension

    return tuple(inspect.signature(cpp_extension.load_inline).parameters)


def _rule_cpp_text(src: Source) -> None:
    """Why: C++ runs with the harness's privileges inside the sandbox and past every Python rule. Covers, in
    every string literal and every folded kernel source: threads and processes, file/env/system access, C++
    that calls back into Python, ATen entry points that skip the dispatcher (so the op tracer would not see a
    PyTorch op doing the work: `at::native::`, `at::cpu::`, dispatch-key guards, TORCH_LIBRARY registration),
    global precision switches and side streams. OpenMP pragmas and `at::parallel_for` stay allowed: CPU kernels
    need them, and the harness fixes the thread count they see. Inline PTX `asm` stays allowed on cuda."""
    texts = [n.value for n in src.nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and id(n) not in src.statement_strings]
    texts += [t for _, _, args in kernel_sources(src) for t in (src.fold(a) for a in args) if t]
    for text in map(strip_c_comments, texts):
        for rule, pattern, what, devices in _CPP_RULES:
            m = re.search(pattern, text)
            if m and devices in ("*", src.device):
                src.flag(rule, f"{what}: found {m.group(0).strip()!r}")
        m = re.search(_WARN_CPP, text)
        if m:
            src.warnings.setdefault("warn:precision_downgrade", f"reduced-precision type in kernel: {m.group(0)!r}")


def _rule_imports(src: Source) -> None:
    """Why: imports are how Python code reaches the clock, the file system, processes and the harness
    (`time`, `os`, `sys.modules`, `ctypes`). Covers: every import statement, relative imports, private
    (`_`-prefixed) internals, forbidden modules reached as attributes (`torch.os`), and compilers
    (torch.compile/jit/fx/export, torch.library). Not covered: references smuggled through objects the
    allowlist returns (the dunder rule of `dynamic_code` closes the usual paths)."""
    allowed = ALLOWED_IMPORTS | (CUDA_ONLY_IMPORTS if src.device == "cuda" else set())
    for n in src.nodes:
        if isinstance(n, ast.ImportFrom) and n.level:
            src.flag("forbidden_import", "relative import", n)
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [f"{n.module}.{a.name}" for a in n.names if n.module]
            for mod in mods:
                parts = mod.split(".")
                if any(mod == p or mod.startswith(p + ".") for p in PROCESS_MODULES):
                    src.flag("threads_or_processes", f"import of {mod}: no threads or processes", n)
                elif parts[0] not in allowed:
                    src.flag("forbidden_import", f"import of {parts[0]} (allowed: {', '.join(sorted(allowed))})", n)
                elif any(p.startswith("_") and not p.startswith("__") for p in parts):
                    src.flag("forbidden_import", f"import of private internals {mod}", n)
                elif any(mod == api or mod.startswith(api + ".") for api in COMPILER_APIS):
                    src.flag("torch_compiler", f"import of {mod}: write the kernel instead", n)
                elif any(mod == api or mod.startswith(api + ".") for api in TORCH_FILE_APIS):
                    src.flag("file_access", f"import of {mod}: no file access from the candidate", n)
        elif isinstance(n, ast.Attribute):
            q = src.qualname(n) or ""
            if n.attr in FORBIDDEN_ATTRS:
                src.flag("forbidden_import", f"module {n.attr} reached as an attribute", n)
            elif n.attr.startswith("_") and not n.attr.startswith("__") and q:
                src.flag("forbidden_import", f"private internals {q}", n)
            elif q in PROCESS_MODULES:
                src.flag("threads_or_processes", f"{q}: no threads or processes", n)
            if n.attr == "from_file" or any(q == api or q.startswith(api + ".") for api in TORCH_FILE_APIS):
                src.flag("file_access", f"{q or n.attr}: no file access from the candidate", n)
            for api in COMPILER_APIS:
                if q == api or q.startswith(api + "."):
                    src.flag("torch_compiler", f"{q}: compiled or registered ops hide the computation from the "
                             "op tracer; write the kernel", n)


def _rule_dynamic_code(src: Source) -> None:
    """Why: code assembled at run time defeats every rule that reads the source (`exec`, `__import__`),
    and object introspection reaches what imports cannot (`().__class__.__mro__[1].__subclasses__()`,
    a wrapper's `__closure__`, a module's `__dict__`). Covers: the exec-like builtins and `open`, every dunder
    name or attribute except `__init__` and `__name__`, getattr/setattr/delattr on modules or with dunder or
    computed names on modules, frame/traceback/generator-frame attributes (`FRAME_ATTRS`). Not covered:
    getattr on ordinary objects with other constant names (harmless)."""
    called = {id(n.func) for n in src.nodes if isinstance(n, ast.Call)}
    for n in src.nodes:
        # Called, or passed around as a value for the unambiguous ones (`input` may be a tensor's name).
        if isinstance(n, ast.Name) and n.id in EXEC_BUILTINS and src.imports.get(n.id) is None \
                and (id(n) in called or n.id in ("exec", "eval", "__import__", "globals", "locals")):
            src.flag("dynamic_code", f"{n.id} is not allowed", n)
        elif isinstance(n, ast.Name) and n.id.startswith("__") and n.id not in ALLOWED_DUNDERS:
            src.flag("dynamic_code", f"{n.id} is not allowed", n)
        elif isinstance(n, ast.Attribute) and n.attr.startswith("__") and n.attr not in ALLOWED_DUNDERS:
            src.flag("dynamic_code", f"attribute {n.attr} is not allowed", n)
        elif isinstance(n, ast.Attribute) and n.attr in FRAME_ATTRS:
            src.flag("dynamic_code", f"attribute {n.attr}: frames and tracebacks reach the harness's state", n)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and len(n.args) >= 2 \
                and n.func.id in ("getattr", "setattr", "delattr", "hasattr"):
            target, name = n.args[0], n.args[1]
            const = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
            if src.qualname(target):
                rule = "timer_or_torch_patching" if n.func.id in ("setattr", "delattr") else "dynamic_code"
                src.flag(rule, f"{n.func.id} on module {src.qualname(target)}", n)
            elif const is None or const.startswith("__") or const in FRAME_ATTRS:
                src.flag("dynamic_code", f"{n.func.id} with a computed, dunder or frame name", n)
            elif const == "Model":
                src.flag("subclass_reference", "reaches the reference Model by name", n)


def _rule_patching(src: Source) -> None:
    """Why: the harness's timer, comparator and torch itself live in the candidate's process during the run;
    a candidate that rebinds `torch.cuda.Event`, `torch.cuda.synchronize`, `torch.allclose` or a Tensor
    method fakes its time or its correctness. Covers: assignment, augmented assignment and deletion of any
    attribute (or item) of an imported module or a name bound to one, global torch settings the reference
    shares (default dtype/device, denormals, threads), streams. Precision switches (`allow_tf32`,
    `set_float32_matmul_precision`) reject as `precision_downgrade`: they change the reference's math too,
    and they are global state. Conversions inside the candidate's own code (`.half()`, `__half`) only warn:
    fp16 tasks need them, and the dtype-aware tolerance catches a downgrade that changes results."""
    for n in src.nodes:
        targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else \
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            base = t.value if isinstance(t, ast.Subscript) else t
            q = src.qualname(base) if isinstance(base, (ast.Attribute, ast.Name)) else None
            if q and isinstance(base, ast.Attribute):
                rule = "precision_downgrade" if base.attr in PRECISION_ATTRS else "timer_or_torch_patching"
                src.flag(rule, f"assignment to {q}", n)
        if isinstance(n, ast.Call):
            q = src.qualname(n.func) or ""
            last = q.rsplit(".", 1)[-1]
            if last == "set_float32_matmul_precision" and not (n.args and src.fold(n.args[0]) == "highest"):
                src.flag("precision_downgrade", f"{q} lowers fp32 matmul precision", n)
            elif last in ("set_num_threads", "set_num_interop_threads") and q.startswith("torch"):
                src.flag("threads_or_processes", f"{q}: the harness fixes the thread count", n)
            elif q in STREAM_APIS:
                src.flag("side_streams", f"{q}: work on a side stream escapes CUDA-event timing", n)
            elif last in GLOBAL_SETTERS and q.startswith("torch"):
                src.flag("timer_or_torch_patching", f"{q} changes global state the reference shares", n)
            elif q.startswith("torch.backends.") and "flags" in q:
                src.flag("precision_downgrade", f"{q} changes backend math flags", n)
        if isinstance(n, ast.Attribute) and n.attr in _WARN_PY and (src.qualname(n.value) or "").startswith("torch"):
            src.warnings.setdefault("warn:precision_downgrade", f"reduced-precision dtype torch.{n.attr}")
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("half", "bfloat16"):
            src.warnings.setdefault("warn:precision_downgrade", f".{n.func.attr}() conversion")


def _rule_structure(src: Source) -> None:
    """Why: Kevin-32B's policy learned `class ModelNew(Model): pass` and try/except fallbacks to PyTorch.
    Covers: any try statement (a fallback when the kernel fails to build or run is never needed by a correct
    candidate), classes defining `__exit__` (a context manager that swallows exceptions is a try/except),
    any class deriving from something named Model and any reference to the name `Model`, and lazy tensors:
    Tensor/Parameter subclasses and `__torch_function__`/`__torch_dispatch__`/`as_subclass`, which can defer
    the work until the comparator reads the result (gpu-mode reference-kernels #162). Not covered: a
    candidate that pastes the reference's body under another name (the op tracer catches its PyTorch ops).
    Memoising decorators are rejected too (CUDA-L1 and gpu-mode saw results cached by input identity); a
    hand-written cache keyed by `data_ptr()` is left to the harness's rotation of fresh input sets."""
    for n in src.nodes:
        if isinstance(n, ast.Try) or type(n).__name__ == "TryStar":
            src.flag("try_except", "try/except is not allowed: a fallback hides a failing kernel", n)
        elif isinstance(n, ast.FunctionDef) and n.name == "__exit__":
            src.flag("try_except", "__exit__ can swallow exceptions like try/except", n)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in LAZY_NAMES:
            src.flag("lazy_tensor", f"{n.name}: tensor subclasses and dispatch hooks are not allowed", n)
        elif isinstance(n, (ast.Name, ast.Attribute)) and last_name(n) in LAZY_NAMES:
            src.flag("lazy_tensor", f"{last_name(n)}: tensor subclasses and dispatch hooks are not allowed", n)
        elif isinstance(n, ast.Attribute) and n.attr == "overrides" and src.qualname(n) == "torch.overrides":
            src.flag("lazy_tensor", "torch.overrides is not allowed", n)
        if isinstance(n, (ast.Name, ast.Attribute)) and src.qualname(n) in CACHE_APIS:
            src.flag("result_caching", f"{src.qualname(n)}: outputs must be computed on every call", n)
        if isinstance(n, ast.ClassDef):
            for b in n.bases:
                if last_name(b) == "Model":
                    src.flag("subclass_reference", f"class {n.name} derives from the reference Model", n)
                elif last_name(b) in ("Tensor", "Parameter"):
                    src.flag("lazy_tensor", f"class {n.name} subclasses {last_name(b)}", n)
        elif isinstance(n, (ast.Name, ast.Attribute)) and last_name(n) == "Model":
            src.flag("subclass_reference", "the reference Model must not be used", n)


def _rule_triton(src: Source) -> None:
    """Why and what: see `kernelbench.harness.build.triton_kernels` (Triton's API allowlist, kernel bodies that stay
    Triton under the interpreter, inline assembly on CPU)."""
    triton_kernels.check(src)


RULES = (_rule_no_custom_kernel, _rule_structure, _rule_imports, _rule_dynamic_code, _rule_patching, _rule_cpp_text,
         _rule_triton)


def _analyse(src_text: str, device: str) -> Source | None:
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    try:
        tree = ast.parse(src_text)
    except (SyntaxError, ValueError):
        return None
    src = Source(tree, device)
    for rule in RULES:
        rule(src)
    return src


def check_source(src: str, device: str) -> list[Violation]:
    """Every rule's first finding, one violation per flag; empty when the source passes or does not parse."""
    found = _analyse(src, device)
    return [] if found is None else [Violation(f, r) for f, r in found.found.items()]


def source_warnings(src: str, device: str) -> list[Violation]:
    """Findings that do not reject (`warn:precision_downgrade`): a correct result's feedback notes them
    (`evaluate`)."""
    found = _analyse(src, device)
    return [] if found is None else [Violation(f, r) for f, r in found.warnings.items()]
