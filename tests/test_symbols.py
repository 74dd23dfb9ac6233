"""The build's imports (kernelbench/harness/build/symbols.py): names are judged as the linker sees them, whatever the source
called them. Real libraries built here with the system compiler (no torch headers: a second each)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernelbench.harness.build import symbols


def flags_of(names: list[str]) -> set[str]:
    return {v.flag for v in symbols.judge_symbols(names)}


@pytest.mark.parametrize("name,flag", [
    ("at::cpu::mm(at::Tensor const&, at::Tensor const&)", "build:dispatch_bypass"),
    ("at::cpu::relu(at::Tensor const&)", "build:dispatch_bypass"),
    ("at::cpu::add_(at::Tensor&, at::Tensor const&, c10::Scalar const&)", "build:dispatch_bypass"),
    ("at::cpu::mm_out(at::Tensor&, at::Tensor const&, at::Tensor const&)", "build:dispatch_bypass"),
    ("at::meta::mm(at::Tensor const&, at::Tensor const&)", "build:dispatch_bypass"),
    ("at::cuda::addmm(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)",
     "build:dispatch_bypass"),
    ("at::compositeexplicitautograd::linear(at::Tensor const&, at::Tensor const&)", "build:dispatch_bypass"),
    ("at::native::relu(at::Tensor const&)", "build:dispatch_bypass"),
    ("at::_ops::mm::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)", "build:dispatch_bypass"),
    ("c10::Dispatcher::realSingleton()", "build:dispatch_bypass"),
    ("cblas_sgemm", "build:library_compute"), ("sgemm_", "build:library_compute"), ("dgetrf_", "build:library_compute"),
    ("mkl_sparse_s_mm", "build:library_compute"), ("dnnl_sgemm", "build:library_compute"),
    ("dnnl::matmul::primitive_desc::primitive_desc()", "build:library_compute"),
    ("at::native::cpublas::gemm(char, char, long, long, long, float, float const*, long)", "build:library_compute"),
    ("at::cuda::blas::gemm<float>(char, char, long, long, long, float, float const*, long)", "build:library_compute"),
    ("cudnnConvolutionForward", "build:library_compute"),
    ("thrd_create@GLIBC_2.34", "build:threads_or_processes"), ("pthread_create@GLIBC_2.34", "build:threads_or_processes"),
    ("clone@GLIBC_2.2.5", "build:threads_or_processes"), ("_Fork@GLIBC_2.34", "build:threads_or_processes"),
    ("std::thread::_M_start_thread(std::unique_ptr<std::thread::_State, std::default_delete<std::thread::_State> >, "
     "void (*)())@GLIBCXX_3.4.22", "build:threads_or_processes"),
    ("c10::ThreadPool::ThreadPool(int, int, std::function<void ()>)", "build:threads_or_processes"),
    ("at::launch(std::function<void ()>)", "build:threads_or_processes"),
    ("fopen64@GLIBC_2.2.5", "build:cpp_io_or_syscalls"), ("creat@GLIBC_2.2.5", "build:cpp_io_or_syscalls"),
    ("open64@GLIBC_2.2.5", "build:cpp_io_or_syscalls"), ("__open_2@GLIBC_2.7", "build:cpp_io_or_syscalls"),
    ("openat@GLIBC_2.4", "build:cpp_io_or_syscalls"), ("syscall@GLIBC_2.2.5", "build:cpp_io_or_syscalls"),
    ("mmap64@GLIBC_2.2.5", "build:cpp_io_or_syscalls"), ("dlsym@GLIBC_2.34", "build:cpp_io_or_syscalls"),
    ("getenv@GLIBC_2.2.5", "build:cpp_io_or_syscalls"),
    # hooks that run code inside the harness's own ops: an op observer, a replaced allocator
    ("at::addGlobalCallback(at::RecordFunctionCallback)", "build:torch_hooks"),
    ("at::RecordFunction::name() const", "build:torch_hooks"),
    ("c10::SetCPUAllocator(c10::Allocator*, unsigned char)", "build:torch_hooks"),
    # glibc's other exported openers: `_IO_fopen` read /proc/self/status with every name above refused
    ("_IO_fopen@GLIBC_2.2.5", "build:cpp_io_or_syscalls"), ("_IO_file_fopen@GLIBC_2.2.5", "build:cpp_io_or_syscalls"),
    ("_IO_file_open@GLIBC_2.2.5", "build:cpp_io_or_syscalls"), ("fts_open@GLIBC_2.2.5", "build:cpp_io_or_syscalls"),
    ("fts64_open@GLIBC_2.23", "build:cpp_io_or_syscalls"), ("nftw64@GLIBC_2.3.3", "build:cpp_io_or_syscalls"),
    ("__open_nocancel@GLIBC_PRIVATE", "build:cpp_io_or_syscalls"),
    ("__nss_files_fopen@GLIBC_PRIVATE", "build:cpp_io_or_syscalls"),
    ("__libc_alloca_cutoff@GLIBC_PRIVATE", "build:cpp_io_or_syscalls"),
    ("std::basic_ofstream<char, std::char_traits<char> >::basic_ofstream(char const*, std::_Ios_Openmode)",
     "build:cpp_io_or_syscalls"),
])
def test_forbidden_imports(name, flag):
    assert flag in flags_of([name])


def test_what_honest_kernels_import_is_allowed():
    """Symbols read from an honest clang -fopenmp ReLU, a gcc build and a CUDA object: allocation through the
    dispatcher, metadata, TORCH_CHECK, pybind11, the Python C API, libc/libm, SLEEF, OpenMP, CUDA, cuBLAS."""
    honest = [
        "at::_ops::empty_like::call(at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, "
        "std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
        "at::TensorBase::__dispatch_contiguous(c10::MemoryFormat) const", "float* at::TensorBase::data_ptr<float>() const",
        "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)",
        "c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(c10::DispatchKeySet)",
        "pybind11::detail::type_caster<at::Tensor, void>::load(pybind11::handle, bool)", "PyFrame_GetBack",
        "torch::translate_exception_to_python(std::__exception_ptr::exception_ptr const&)",
        "__kmpc_fork_call@VERSION", "GOMP_parallel@GOMP_4.0", "omp_get_thread_num@OMP_1.0",
        "pthread_mutex_lock@GLIBC_2.2.5", "expf@GLIBC_2.27", "tanhf@GLIBC_2.2.5", "memcpy@GLIBC_2.14",
        "fprintf@GLIBC_2.2.5", "stderr@GLIBC_2.2.5", "Sleef_expf8_u10", "at::cpu::is_avx2_supported()",
        "at::cuda::getCurrentCUDAStream(signed char)", "c10::cuda::getCurrentCUDAStream(signed char)",
        "at::cuda::getCurrentDeviceProperties()", "at::cuda::getCurrentCUDABlasHandle()", "cublasSgemm_v2",
        "cudaLaunchKernel", "__cudaRegisterFatBinary", "at::internal::lazy_init_num_threads()",
        "at::get_num_threads()", "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)",
    ]
    assert flags_of(honest) == set()


LIBRARY = r"""
#include <cstdio>
#include <threads.h>
namespace at { class Tensor; namespace cpu { void relu(const Tensor&); } }
namespace fast = at::cpu;
extern "C" void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
void bypass(const at::Tensor& x) { fast::relu(x); }
void blas(float* c) { cblas_sgemm(0, 0, 0, 1, 1, 1, 1.f, c, 1, c, 1, 0.f, c, 1); }
static int body(void*) { return 0; }
int hidden() { thrd_t t; return thrd_create(&t, body, nullptr); }
void *file() { return fopen64("/tmp/x", "w"); }
"""


def _shared_library(tmp_path: Path, text: str) -> Path:
    src, lib = tmp_path / "lib.cpp", tmp_path / "ext" / "lib.so"
    lib.parent.mkdir()
    src.write_text(text)
    subprocess.run(["c++", "-shared", "-fPIC", "-O1", str(src), "-o", str(lib)], check=True, timeout=120)
    return lib


def test_check_build_reads_a_real_library(tmp_path):
    """An alias (`namespace fast = at::cpu`) is invisible in the source's calls, not in the library's imports."""
    lib = _shared_library(tmp_path, LIBRARY)
    names = symbols.undefined_symbols(str(lib))
    assert "at::cpu::relu(at::Tensor const&)" in names and "fopen64" in " ".join(names)
    found = {v.flag: v.reason for v in symbols.check_build(str(lib.parent))}
    assert set(found) == {"build:dispatch_bypass", "build:library_compute", "build:threads_or_processes",
                          "build:cpp_io_or_syscalls"}
    assert "at::cpu::relu" in found["build:dispatch_bypass"] and "lib.so" in found["build:dispatch_bypass"]


def test_clean_library_and_unreadable_library(tmp_path):
    lib = _shared_library(tmp_path, "#include <cmath>\nfloat f(float x) { return std::exp(x) + 1.0f; }\n")
    assert symbols.check_build(str(lib.parent)) == []
    lib.write_bytes(b"not an ELF file")
    assert {v.flag for v in symbols.check_build(str(lib.parent))} == {"build:unreadable_library"}
