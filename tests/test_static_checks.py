"""Static policy checks on adversarial and legitimate candidate sources (parsed only, never run)."""

from __future__ import annotations

import pytest

from kernelbench.harness.source_scan import strip_c_comments
from kernelbench.harness.protocol import Violation
from kernelbench.harness.static_checks import check_source, source_warnings

CPU_OK = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <torch/extension.h>
// relu over a contiguous float tensor; open-coded so no ATen compute op runs
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

relu_ext = load_inline(name="relu_cpu", cpp_sources=cpp_source, functions=["relu_forward"],
                       extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ext = relu_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ext.relu_forward(x)
'''

CUDA_OK = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BLOCK = 256
cuda_source = f"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {{
    auto out = torch::empty_like(a);
    int n = a.numel();
    auto stream = at::cuda::getCurrentCUDAStream();
    add_kernel<<<(n + {BLOCK} - 1) / {BLOCK}, {BLOCK}, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                     out.data_ptr<float>(), n);
    return out;
}}
"""
cpp_source = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"

add_ext = load_inline(name="add_cuda", cpp_sources=cpp_source, cuda_sources=cuda_source,
                      functions=["add_cuda"], extra_cuda_cflags=["-O3", "--use_fast_math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_ext.add_cuda(a.contiguous(), b.contiguous())
'''

CUPY_OK = '''
import torch
import torch.nn as nn
import cupy

_code = r"""
extern "C" __global__ void scale(const float* x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s;
}
"""
scale_kernel = cupy.RawModule(code=_code).get_function("scale")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        scale_kernel(((n + 255) // 256,), (256,), (x.data_ptr(), y.data_ptr(), cupy.float32(2.0), cupy.int32(n)))
        return y
'''


def flags(src: str, device: str = "cpu") -> set[str]:
    return {v.flag for v in check_source(src, device)}


def cpu_with(python: str = "", cpp: str = "", forward: str = "return self.ext.relu_forward(x)") -> str:
    """The legitimate CPU solution with extra module-level Python, extra C++ and another forward body."""
    src = CPU_OK.replace('#include <torch/extension.h>\n', '#include <torch/extension.h>\n' + cpp + "\n", 1)
    src = src.replace("return self.ext.relu_forward(x)", forward)
    return src.replace("from torch.utils.cpp_extension import load_inline\n",
                       "from torch.utils.cpp_extension import load_inline\n" + python + "\n", 1)


def test_legitimate_solutions_pass_clean():
    assert check_source(CPU_OK, "cpu") == []
    assert check_source(CUDA_OK, "cuda") == []
    assert check_source(CUPY_OK, "cuda") == []
    assert all(isinstance(v, Violation) for v in check_source("import os", "cpu"))


def test_missing_model_new_and_syntax_errors_are_not_violations():
    assert "static:subclass_reference" not in flags(CPU_OK.replace("class ModelNew", "class Other"))
    assert check_source("def broken(:\n", "cpu") == []
    with pytest.raises(ValueError):
        check_source(CPU_OK, "tpu")


# --- no_custom_kernel -------------------------------------------------------------------------------------

PYTORCH_ONLY = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


@pytest.mark.parametrize("src,device", [
    (PYTORCH_ONLY, "cpu"),
    ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n", "cpu"),
    # declarations only: nothing to run
    (CPU_OK.replace("cpp_sources=cpp_source", 'cpp_sources="torch::Tensor relu_forward(torch::Tensor x);"'), "cpu"),
    # a C++ kernel is not a CUDA kernel
    (CPU_OK, "cuda"),
    # CUDA text without __global__ (host code calling ATen)
    (CUDA_OK.replace("__global__", "__device__"), "cuda"),
    # the kernel lives only in a comment
    (CUDA_OK.replace("__global__ void add_kernel", "// __global__\nvoid add_kernel"), "cuda"),
    # load(sources=files): the candidate cannot have written those files
    ("import torch.utils.cpp_extension as ce\nm = ce.load(name='x', sources=['x.cpp'])\n", "cpu"),
])
def test_no_custom_kernel(src, device):
    assert "static:no_custom_kernel" in flags(src, device)


@pytest.mark.parametrize("first", [
    "auto y = torch::empty({1}, x.options());",
    "if (x.numel() == 0) { return x; }",
    "std::vector<int64_t> shape{x.size(0)};",
])
def test_first_statement_with_braces_is_a_kernel(first):
    """A body whose first statement holds braces is still a body with statements (it was once rejected)."""
    src = CPU_OK.replace("    auto xc = x.contiguous();", f"    {first}\n    auto xc = x.contiguous();", 1)
    assert first in src
    assert "static:no_custom_kernel" not in flags(src)


def test_empty_bodies_are_not_kernels():
    empty = CPU_OK.replace("cpp_sources=cpp_source",
                           'cpp_sources="torch::Tensor relu_forward(torch::Tensor x) {}\\nint k = 0;"')
    assert "static:no_custom_kernel" in flags(empty)


def test_kernel_source_must_be_literal():
    src = CPU_OK.replace("cpp_sources=cpp_source", "cpp_sources=''.join(['tor', cpp_source])")
    assert "static:dynamic_code" in flags(src)
    folded = CPU_OK.replace("cpp_sources=cpp_source", "cpp_sources=[HEADER + cpp_source]").replace(
        "relu_ext =", 'HEADER = "#include <vector>\\n"\nrelu_ext =')
    assert flags(folded) == set()


# --- try_except -------------------------------------------------------------------------------------------

def test_try_except_fallback():
    src = cpu_with(forward="try:\n            return self.ext.relu_forward(x)\n"
                           "        except Exception:\n            return torch.relu(x)")
    assert "static:try_except" in flags(src)
    assert "static:try_except" in flags(cpu_with(python="class Quiet:\n    def __enter__(self): return self\n"
                                                        "    def __exit__(self, *a): return True\n"))
    assert "static:try_except" not in flags(CPU_OK)


# --- subclass_reference -----------------------------------------------------------------------------------

@pytest.mark.parametrize("snippet", [
    "class ModelNew(Model):\n    pass\n",
    "class Fast(Model):\n    pass\n",
    "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return Model()(x)\n",
    "ref = getattr(object, 'Model')\n",
])
def test_subclass_reference(snippet):
    assert "static:subclass_reference" in flags(CPU_OK + "\n" + snippet)


def test_model_like_names_are_fine():
    assert "static:subclass_reference" not in flags(CPU_OK + "\nclass ModelNewHelper:\n    pass\nModels = 3\n")


# --- forbidden_import -------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["import os", "import sys", "import numpy as np", "from time import perf_counter",
                                  "import ctypes", "import importlib", "from . import sibling",
                                  "import pickle", "import inspect", "import gc", "import builtins",
                                  "from torch import _C", "import torch._dynamo", "import cupy",
                                  "x = torch.os.system", "y = torch._C._set_grad_enabled"])
def test_forbidden_import(line):
    assert "static:forbidden_import" in flags(cpu_with(python=line))


@pytest.mark.parametrize("line", ["import math", "from typing import Optional", "import functools",
                                  "from collections import OrderedDict", "import torch.nn.functional as F",
                                  "import itertools, numbers, dataclasses", "from __future__ import annotations"])
def test_allowed_import(line):
    assert flags(cpu_with(python=line)) == set()


def test_cupy_allowed_only_on_cuda():
    assert "static:forbidden_import" in flags(CUPY_OK, "cpu")
    assert flags(CUPY_OK, "cuda") == set()


@pytest.mark.parametrize("line", ["f = torch.compile(lambda x: x)", "from torch import compile",
                                  "g = torch.jit.script", "import torch.fx", "lib = torch.library.Library",
                                  "torch.ops.load_library('x.so')"])
def test_torch_compiler(line):
    assert "static:torch_compiler" in flags(cpu_with(python=line))


# --- dynamic_code -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["exec('x = 1')", "y = eval('1 + 1')", "c = compile('1', 'f', 'eval')",
                                  "m = __import__('o' + 's')", "g = globals()", "f = open('/etc/passwd')",
                                  "b = __builtins__", "s = ().__class__.__mro__[1].__subclasses__()",
                                  "d = torch.__dict__", "fn = getattr(torch, 'relu')",
                                  "name = 'x'\nv = getattr(ModelNewX, name)", "w = relu_ext.relu_forward.__closure__",
                                  "e = exec"])
def test_dynamic_code(line):
    assert "static:dynamic_code" in flags(cpu_with(python=line) if "relu_ext" not in line else CPU_OK + line)


def test_ordinary_names_that_shadow_builtins_pass():
    src = cpu_with(forward="input = x\n        return self.ext.relu_forward(input)")
    assert flags(src) == set()
    assert flags(cpu_with(python="n = getattr(nn.Module, 'training', True)")) == {"static:dynamic_code"}
    assert flags(CPU_OK + "\nclass Holder:\n    def get(self):\n        return getattr(self, 'ext', None)\n") == set()


# --- timer_or_torch_patching and precision ----------------------------------------------------------------

@pytest.mark.parametrize("line", ["torch.allclose = lambda *a, **k: True", "torch.cuda.Event = object",
                                  "torch.cuda.synchronize = lambda: None", "torch.Tensor.__eq__ = None",
                                  "t = torch\nt.allclose = None", "from torch import cuda\ncuda.Event.elapsed_time = 0",
                                  "setattr(torch, 'allclose', None)", "del torch.testing",
                                  "torch.backends.cudnn.benchmark = True", "torch.set_default_dtype(torch.float64)",
                                  "torch.set_flush_denormal(True)", "nn.Module.__call__ = None"])
def test_timer_or_torch_patching(line):
    found = flags(cpu_with(python=line))
    assert "static:timer_or_torch_patching" in found or "static:dynamic_code" in found
    if "__" not in line:
        assert "static:timer_or_torch_patching" in found


@pytest.mark.parametrize("line", ["torch.backends.cuda.matmul.allow_tf32 = True",
                                  "torch.backends.cudnn.allow_tf32 = True",
                                  "torch.set_float32_matmul_precision('high')",
                                  "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True"])
def test_precision_switches_reject(line):
    assert "static:precision_downgrade" in flags(cpu_with(python=line))


def test_precision_conversions_only_warn():
    src = cpu_with(forward="return self.ext.relu_forward(x.half()).to(torch.float16)")
    assert "static:precision_downgrade" not in flags(src)
    assert [v.flag for v in source_warnings(src, "cpu")] == ["warn:precision_downgrade"]
    assert source_warnings(CPU_OK, "cpu") == []
    assert source_warnings(CUDA_OK.replace("const float* a", "const __half* a"), "cuda")[0].flag == \
        "warn:precision_downgrade"
    assert "static:precision_downgrade" not in flags(cpu_with(python="torch.set_float32_matmul_precision('highest')"))


def test_local_attribute_assignment_is_not_patching():
    src = cpu_with(forward="self.cache = x\n        out = torch.empty_like(x)\n        out.requires_grad = False\n"
                           "        return self.ext.relu_forward(x)")
    assert flags(src) == set()


# --- threads_or_processes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["import threading", "from concurrent.futures import ThreadPoolExecutor",
                                  "import multiprocessing", "import subprocess", "import torch.multiprocessing",
                                  "torch.set_num_threads(8)", "from torch import distributed"])
def test_threads_python(line):
    assert "static:threads_or_processes" in flags(cpu_with(python=line))


@pytest.mark.parametrize("cpp", ["#include <thread>", "void f() { std::thread t([]{}); t.join(); }",
                                 "void f() { pthread_create(0, 0, 0, 0); }", "int f() { return fork(); }",
                                 "int f() { return system(\"ls\"); }", "void f() { popen(\"ls\", \"r\"); }",
                                 "void f() { execvp(\"sh\", 0); }", "auto f() { return std::async([]{ return 1; }); }",
                                 "void f() { omp_set_num_threads(16); }",
                                 "void f() {\n#pragma omp parallel for num_threads(16)\n"
                                 "for (int i = 0; i < 4; ++i) {}\n}",
                                 "int f() { return sys\\\ntem(\"ls\"); }",
                                 # spellings outside the C++ and POSIX thread APIs
                                 "#include <threads.h>", "void f() { thrd_t t; thrd_create(&t, g, 0); }",
                                 "int f() { return clone(g, stack, 0, 0); }", "int f() { return ::clone3(0, 0); }",
                                 "int f() { return _Fork(); }", "void f() { c10::ThreadPool pool(2); }",
                                 "void f() { at::launch([] {}); }"])
def test_threads_cpp(cpp):
    assert "static:threads_or_processes" in flags(cpu_with(cpp=cpp))


def test_tensor_clone_and_member_calls_are_not_threads_or_files():
    cpp = "torch::Tensor g(torch::Tensor x) { auto y = x.clone(); auto z = at::clone(y); return z->clone(); }\n" \
          "void h(std::list<int>& a, std::list<int>& b, std::vector<int>& v) { a.splice(a.end(), b);\n" \
          "  v.erase(std::remove(v.begin(), v.end(), 0), v.end()); }"
    assert flags(cpu_with(cpp=cpp)) == set()


def test_openmp_and_parallel_for_allowed():
    cpp = "void g(int64_t n) { at::parallel_for(0, n, 1, [&](int64_t b, int64_t e) {}); }\n" \
          "int h() { return at::get_num_threads() + omp_get_num_threads(); }"
    assert flags(cpu_with(cpp=cpp)) == set()


# --- cpp_io_or_syscalls -----------------------------------------------------------------------------------

@pytest.mark.parametrize("cpp", ["void f() { fopen(\"/tmp/x\", \"w\"); }", "int f() { return open(\"/x\", 0); }",
                                 "int f() { return socket(2, 1, 0); }", "const char* f() { return getenv(\"HOME\"); }",
                                 "void* f() { return dlopen(\"libc.so.6\", 2); }", "long f() { return syscall(39); }",
                                 "void* f() { return mmap(0, 4096, 3, 34, -1, 0); }",
                                 "long f() { return ptrace(0, 0, 0, 0); }",
                                 "const char* p = \"/proc/self/maps\";", "void f() { asm(\"nop\"); }",
                                 "#include <unistd.h>", "#include <fstream>", "std::ofstream out;",
                                 # the large-file and creation siblings of open/fopen
                                 "void f() { fopen64(\"/tmp/x\", \"w\"); }", "int f() { return creat(\"/x\", 420); }",
                                 # glibc's stdio internals and file-tree walks open files too
                                 "auto f(const char* p) { return _IO_fopen(p, \"r\"); }",
                                 "auto f(char* const* p) { return fts_open(p, 0, nullptr); }",
                                 "int f() { return creat64(\"/x\", 420); }", "int f() { return open64(\"/x\", 0); }",
                                 "int f() { return openat(-100, \"/x\", 0); }", "int f() { return ::openat64(3, \"x\", 0); }",
                                 "void f() { freopen(\"/x\", \"w\", stdout); }", "void f() { fdopen(3, \"w\"); }",
                                 "void f() { tmpfile(); }", "int f() { return rename(\"/a\", \"/b\"); }",
                                 "int f() { return symlink(\"/a\", \"/b\"); }", "int f() { return __open_2(\"/x\", 0); }"])
def test_cpp_io_or_syscalls(cpp):
    assert "static:cpp_io_or_syscalls" in flags(cpu_with(cpp=cpp))


def test_ptx_asm_allowed_on_cuda_and_comments_ignored():
    cuda = CUDA_OK.replace("int i = blockIdx.x",
                           "unsigned lane; asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n"
                           "    int i = blockIdx.x")
    assert flags(cuda, "cuda") == set()
    assert flags(cpu_with(cpp="// we never open( files or call system( here\n/* fork() */")) == set()
    # a string containing // must not hide the code after it
    hidden = 'const char* u = "a//b"; int f() { return system("x"); }'
    assert "static:threads_or_processes" in flags(cpu_with(cpp=hidden))


def test_cpp_dynamic_code_and_dispatch_bypass():
    assert "static:dynamic_code" in flags(cpu_with(cpp="void f() { PyRun_SimpleString(\"import os\"); }"))
    assert "static:dynamic_code" in flags(cpu_with(cpp="void f() { py::module_::import(\"os\"); }"))
    assert "static:dynamic_code" in flags(cpu_with(cpp="#define CAT(a, b) a##b"))
    for cpp in ["torch::Tensor g(torch::Tensor x) { return at::native::relu(x); }",
                "torch::Tensor g(torch::Tensor x) { return at::cpu::add(x, x); }",
                "void g() { c10::impl::ExcludeDispatchKeyGuard guard(c10::DispatchKey::Python); }",
                "TORCH_LIBRARY(myops, m) { m.def(\"f(Tensor x) -> Tensor\"); }",
                "torch::Tensor g(torch::Tensor x) { return at::cuda::relu(x); }"]:
        assert "static:dispatch_bypass" in flags(cpu_with(cpp=cpp)), cpp
    assert flags(CUDA_OK.replace("auto stream = at::cuda::getCurrentCUDAStream();",
                                 "auto stream = at::cuda::getCurrentCUDAStream(); int d = at::cuda::device_count();"),
                 "cuda") == set()


@pytest.mark.parametrize("line", [
    "def g():\n    yield box[0].gi_frame.f_back\nbox = [g()]",
    "def up(frame):\n    return frame.f_locals",
    "def tb(e):\n    return e.tb_frame",
    "def co(c):\n    return c.cr_frame",
    "def g(gen):\n    return getattr(gen, 'gi_frame')",
])
def test_frame_introspection_is_dynamic_code(line):
    """Frames lead up the stack to the harness's timing loop without `sys` or a dunder
    (tests/adversarial/forge_times_frames.py)."""
    assert "static:dynamic_code" in flags(cpu_with(python=line))


@pytest.mark.parametrize("cpp", [
    "void f() { PyFrameObject* fr = PyThreadState_GetFrame(PyThreadState_Get()); }",
    "void f(PyObject* o) { PyList_SetItem(o, 0, PyFloat_FromDouble(0.0)); }",
    "void f(PyObject* o) { Py_DECREF(o); }",
    "void f(torch::Tensor x) { auto v = THPVariable_Wrap(x); }",
    "void f(py::object o) { }",
    "void f(pybind11::handle h) { }",
    "void f(py::object o) { auto t = o.attr(\"f_locals\"); }",
])
def test_python_objects_in_cpp(cpp):
    """C++ that touches the interpreter reaches the timing loop's trial times (tests/adversarial/cpp_forge_times.py)."""
    assert "static:python_objects" in flags(cpu_with(cpp=cpp))


def test_python_words_in_cpp_that_are_not_the_c_api_pass():
    ok = ('torch::Tensor g(torch::Tensor x) { TORCH_CHECK(x.dim() == 2, "PyTorch-style 2-D input"); return x; }\n'
          'void h(int PyTorchLike, int my_py_size) { (void)PyTorchLike; (void)my_py_size; }')
    assert flags(cpu_with(cpp=ok)) == set()
    named = 'void bind(torch::Tensor (*fn)(torch::Tensor)) { auto a = py::arg("x"); (void)a; (void)fn; }'
    assert flags(cpu_with(cpp=named)) == set()  # py::arg names a binding's argument: no object access


@pytest.mark.parametrize("line", ["d = torch.load('inputs.pt')", "b = torch.from_file('job.json', size=64)",
                                  "u = torch.UntypedStorage.from_file('inputs.pt', False, 64)",
                                  "from torch import load", "from torch.utils.cpp_extension import load",
                                  "torch.save(torch.ones(1), 'x.pt')", "import torch.hub"])
def test_file_access_through_torch(line):
    """The run child's folder holds the job and the input sets: reading them tells verification inputs from
    timed ones (tests/adversarial/skip_timed_calls.py needs no file; one that reads would)."""
    assert "static:file_access" in flags(cpu_with(python=line))


def test_file_access_through_torch_in_cpp():
    assert "static:cpp_io_or_syscalls" in flags(cpu_with(cpp='void f() { auto t = torch::from_file("x", false, 4); }'))
    assert "static:cpp_io_or_syscalls" in flags(cpu_with(cpp='void f(torch::Tensor x) { torch::save(x, "x.pt"); }'))


# --- side_streams -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("edit", [
    ("auto stream = at::cuda::getCurrentCUDAStream();", "cudaStream_t stream; cudaStreamCreate(&stream);"),
    ("auto stream = at::cuda::getCurrentCUDAStream();", "auto stream = at::cuda::getStreamFromPool();"),
    ("0, stream>>>", "0, (cudaStream_t)2>>>"),
    ("0, stream>>>", "0, cudaStreamPerThread>>>"),
    ("BLOCK = 256", "BLOCK = 256\nside = torch.cuda.Stream()"),
    ("BLOCK = 256", "BLOCK = 256\ns = cupy.cuda.Stream(non_blocking=True)"),
])
def test_side_streams(edit):
    src = CUDA_OK.replace(*edit)
    assert src != CUDA_OK
    assert "static:side_streams" in flags(src.replace("import torch\n", "import torch\nimport cupy\n", 1), "cuda")


# --- lazy_tensor ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("snippet", [
    "class Lazy(torch.Tensor):\n    pass\n",
    "class L:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
    "        return 0\n",
    "class L:\n    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):\n        return 0\n",
    "def wrap(x):\n    return x.as_subclass(torch.Tensor)\n",
    "def wrap(x):\n    return torch.Tensor._make_subclass(torch.Tensor, x)\n",
])
def test_lazy_tensor(snippet):
    assert "static:lazy_tensor" in flags(CPU_OK + "\n" + snippet)


@pytest.mark.parametrize("line", ["from functools import lru_cache\n@lru_cache(maxsize=None)\ndef f(x):\n    return x",
                                  "import functools\ncached = functools.cache"])
def test_result_caching(line):
    assert "static:result_caching" in flags(cpu_with(python=line))
    assert flags(cpu_with(python="from functools import partial")) == set()


# --- build flags and comment stripping ------------------------------------------------------------------

@pytest.mark.parametrize("edit", [
    ('extra_cflags=["-O3", "-fopenmp"]', 'extra_cflags=["-O3", "-DX=system"]'),
    ('extra_ldflags=["-fopenmp"]', 'extra_ldflags=["-Wl,--wrap=malloc"]'),
    ('extra_cflags=["-O3", "-fopenmp"]', 'extra_cflags=["-include", "/etc/hosts"]'),
    ('extra_ldflags=["-fopenmp"]', 'extra_include_paths=["/usr/include"]'),
    ('extra_ldflags=["-fopenmp"]', 'build_directory="/tmp/elsewhere"'),
])
def test_build_flags(edit):
    src = CPU_OK.replace(*edit)
    assert src != CPU_OK
    assert "static:build_flags" in flags(src)


def test_strip_c_comments_keeps_strings_and_splices_lines():
    assert strip_c_comments('a /* b */ c // d\ne') == "a   c  \ne"
    assert strip_c_comments('s = "// not a comment"; x') == 's = "// not a comment"; x'
    assert strip_c_comments("sys\\\ntem(") == "system("


def test_one_violation_per_flag_with_line():
    src = cpu_with(python="import os\nimport sys")
    found = check_source(src, "cpu")
    assert [v.flag for v in found].count("static:forbidden_import") == 1
    assert "line" in found[0].reason
