"""Build flags however they are passed: the rules (`build_flags`), the static check's reading of positional and
unpacked arguments, and the child's `load_inline` / `load` hook on the real call (torch's own functions, with
the step that starts ninja replaced by a recorder). End-to-end candidates: tests/test_adversarial.py
(`flags_by_position.py`, `flags_unpacked.py`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp_extension

from kernelbench.harness.child import build_flags, build_manifest, load_inline_hook
from kernelbench.harness.static_checks import check_source

DIAGNOSTIC = [["--ptxas-options=-v"], ["-Xptxas", "-v"], ["-Xptxas=-v"], ["-lineinfo"], ["-res-usage"],
              ["-O3", "-Xptxas", "-O3,-v", "--use_fast_math", "-lineinfo"], ["--ptxas-options", "-v,--warn-on-spills"]]
REFUSED = [["-DKA_ASM=__asm__"], ["-DX=system"], ["-include", "/etc/hosts"], ["-I/etc"], ["-isystem", "/etc"],
           ["-Wl,--wrap=malloc"], ["-Xlinker", "--wrap=malloc"], ["-fplugin=/tmp/x.so"], ["-B/tmp"], ["-specs=/tmp/s"],
           ["-Xcompiler", "-fplugin=/tmp/x.so"], ["-Xptxas"], ["-Xptxas", "-o,/tmp/x"], ["-Xptxas=--output-file=x"],
           ["--ptxas-options=-v", "-DX=y"], ["-O3 -DX=y"], ["-O3\n-DX=y"], ["-O3;id"]]


@pytest.mark.parametrize("flags", DIAGNOSTIC, ids=" ".join)
def test_diagnostic_flags_are_allowed(flags):
    assert build_flags.bad_flag(flags) is None


@pytest.mark.parametrize("flags", REFUSED, ids=repr)
def test_dangerous_flags_are_refused(flags):
    assert build_flags.bad_flag([f.strip() for f in flags]) is not None


# --- the static check -------------------------------------------------------------------------------------------

CPU = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    for (int64_t i = 0; i < x.numel(); ++i) y.data_ptr<float>()[i] = x.data_ptr<float>()[i] > 0 ? x.data_ptr<float>()[i] : 0;
    return y;
}
"""
FLAGS = ["-O3", "-fopenmp"]
@CALL@


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
'''


def static_flags(call: str) -> set[str]:
    return {v.flag for v in check_source(CPU.replace("@CALL@", call), "cpu")}


@pytest.mark.parametrize("call", [
    'ext = load_inline("k", [cpp_source], [], [], ["relu_forward"], ["-O3", "-DX=system"])',
    'ext = load_inline("k", [cpp_source], [], [], ["relu_forward"], FLAGS, [], [], ["-Wl,--wrap=malloc"])',
    'ext = load_inline("k", [cpp_source], [], [], ["relu_forward"], FLAGS, [], [], [], ["/etc"])',
    'ext = load_inline("k", [cpp_source], [], [], ["relu_forward"], ["-O3", "-D" + "X=" + "system"])',
    'ext = load_inline(*("k", [cpp_source]), functions=["relu_forward"])',
    'ext = load_inline("k", [cpp_source], functions=["relu_forward"], **{"extra_cflags": FLAGS})',
    'build = load_inline\next = build("k", [cpp_source], [], [], ["relu_forward"], ["-include", "/etc/hosts"])',
], ids=["define", "ldflags", "include_paths", "computed", "star_args", "star_kwargs", "alias"])
def test_static_check_reads_every_spelling(call):
    assert "static:build_flags" in static_flags(call)


@pytest.mark.parametrize("call", [
    'ext = load_inline("k", [cpp_source], [], [], ["relu_forward"], FLAGS, [], [], ["-fopenmp"])',
    'ext = load_inline("k", [cpp_source], None, None, ["relu_forward"], ["-O3"])',
    'ext = load_inline(name="k", cpp_sources=[cpp_source], functions=["relu_forward"], extra_cflags=FLAGS)',
], ids=["positional", "positional_none", "keywords"])
def test_static_check_passes_honest_spellings(call):
    assert "static:build_flags" not in static_flags(call)


# An honest CUDA candidate in the style of KernelBench's few-shot examples: a shared-memory tiled matmul, built
# with ptxas's register report, as people tuning kernels do.
TILED_MATMUL = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

#define TILE 16

__global__ void tiled_matmul(const float* a, const float* b, float* c, int m, int k, int n) {
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (k + TILE - 1) / TILE; ++t) {
        int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
        ta[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? a[row * k + ka] : 0.0f;
        tb[threadIdx.y][threadIdx.x] = (kb < k && col < n) ? b[kb * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += ta[threadIdx.y][i] * tb[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}

torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous(), bc = b.contiguous();
    int m = ac.size(0), k = ac.size(1), n = bc.size(1);
    auto c = torch::empty({m, n}, ac.options());
    dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    tiled_matmul<<<grid, block>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), m, k, n);
    return c;
}
"""

cpp_source = "torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b);"

matmul = load_inline(name="tiled_matmul", cpp_sources=cpp_source, cuda_sources=cuda_source,
                     functions=["matmul_cuda"], verbose=True, extra_cflags=["-O3"],
                     extra_cuda_cflags=@FLAGS@)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.matmul = matmul

    def forward(self, a, b):
        return self.matmul.matmul_cuda(a, b)
'''


@pytest.mark.parametrize("flags", DIAGNOSTIC, ids=" ".join)
def test_honest_cuda_matmul_with_ptxas_report_passes(flags):
    assert check_source(TILED_MATMUL.replace("@FLAGS@", repr(flags)), "cuda") == []


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_nvcc_accepts_the_diagnostic_flags(tmp_path):
    """The allowed diagnostics are real nvcc options: each compiles a kernel and ptxas prints its registers."""
    kernel = TILED_MATMUL.split('r"""')[1].split("torch::Tensor matmul_cuda")[0].replace("#include <torch/extension.h>", "")
    cu = tmp_path / "k.cu"
    cu.write_text(kernel)
    for flags in DIAGNOSTIC:
        out = subprocess.run(["nvcc", "-c", str(cu), "-o", str(tmp_path / "k.o"), "-arch=sm_90", *flags],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, (flags, out.stderr[-2000:])
        if "-v" in " ".join(flags):
            assert "registers" in out.stderr, (flags, out.stderr[-2000:])


# --- the child's hook on the real call ----------------------------------------------------------------------------

@pytest.fixture
def hooked(monkeypatch, tmp_path):
    """`patch_load_inline` in this process, undone afterwards; torch's `_jit_compile` (what would write the
    ninja file and build) records its arguments instead. Yields the recorded calls."""
    names = ("load_inline", "load", "_run_ninja_build", "_jit_compile", "_check_and_build_extension_h_precompiler_headers",
             "remove_extension_h_precompiler_headers")
    for name in names:
        monkeypatch.setattr(cpp_extension, name, getattr(cpp_extension, name))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(build_manifest, "REFUSED", build_manifest.REFUSED)
    del build_manifest.REFUSED[:]
    built: list[dict] = []
    monkeypatch.setattr(cpp_extension, "_jit_compile", lambda *a, **k: built.append(dict(zip(
        ("name", "sources", "extra_cflags", "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags",
         "extra_include_paths"), a))) or "built")
    load_inline_hook.patch_load_inline("cpu", "")
    yield built
    del build_manifest.REFUSED[:]


SRC = "int f(int x) { return x; }"
BAD = ["-O3", "-D" + "KA_ASM=" + "_" + "_asm__"]


class Sneaky(list):
    """A flag list that shows the check one thing and torch another."""

    def __iter__(self):
        return iter(["-O3"])


@pytest.mark.parametrize("call", [
    lambda li, ld: li("k", [SRC], [], [], ["f"], BAD),
    lambda li, ld: li(*("k", [SRC], None, None, ["f"], BAD)),
    lambda li, ld: li(**{"name": "k", "cpp_sources": [SRC], "functions": ["f"], "extra_cflags": BAD}),
    lambda li, ld: li("k", [SRC], functions=["f"], extra_ldflags=["-Wl,--wrap=malloc"]),
    lambda li, ld: li("k", [SRC], functions=["f"], extra_include_paths=["/etc"]),
    lambda li, ld: li("k", [SRC], functions=["f"], build_directory="/tmp"),
    lambda li, ld: li("../k", [SRC], functions=["f"]),
    lambda li, ld: li("k", [SRC], functions=["f"], extra_cflags=Sneaky(["-DX=system"])),
    lambda li, ld: li("k", [SRC], functions=["f"], extra_cflags="-O3"),
    lambda li, ld: ld("k", ["/tmp/x.cpp"], BAD),
    lambda li, ld: ld(name="k", sources=["/tmp/x.cpp"], extra_include_paths=["/etc"]),
], ids=["positional", "star_args", "star_kwargs", "ldflags", "include_paths", "build_directory", "name", "sneaky_list",
        "string", "load_positional", "load_include"])
def test_hook_refuses_before_anything_is_built(hooked, call):
    alias = cpp_extension.load_inline  # a renamed alias is the same hook
    with pytest.raises(build_manifest.BuildRefused, match="build refused"):
        call(alias, cpp_extension.load)
    assert hooked == [], "torch's build step ran"
    assert len(build_manifest.REFUSED) == 1 and build_manifest.REFUSED[0].startswith(build_flags.MARK)
    assert build_manifest.judge(tuple(build_manifest.REFUSED)).keys() == {build_flags.FLAG}


@pytest.mark.parametrize("call, flags", [
    (lambda li: li("k", [SRC], [], [], ["f"], ["-O3", "-fopenmp"]), ["-O3", "-fopenmp"]),
    (lambda li: li(*("k", [SRC], None, None, ["f"])), list(load_inline_hook.STANDARD_CFLAGS)),
    (lambda li: li(name="k", cpp_sources=SRC, functions=["f"], extra_cflags=("-O2", "-DNDEBUG")), ("-O2", "-DNDEBUG")),
], ids=["positional", "star_args", "keywords"])
def test_hook_builds_honest_calls_with_their_flags(hooked, call, flags):
    assert call(cpp_extension.load_inline) == "built"
    assert len(hooked) == 1 and hooked[0]["extra_cflags"] == flags and build_manifest.REFUSED == []
    assert Path(os.environ["TORCH_EXTENSIONS_DIR"], "k", "main.cpp").exists()


def test_hook_hides_the_unchecked_functions(hooked):
    """No `__wrapped__` leads back to torch's loader, and torch's ninja step outside a checked call refuses."""
    for name in ("load_inline", "load", "_run_ninja_build"):
        assert not hasattr(getattr(cpp_extension, name), "__wrapped__"), name
    with pytest.raises(build_manifest.BuildRefused):
        cpp_extension._run_ninja_build(os.environ["TORCH_EXTENSIONS_DIR"], False, "Error building extension")
    assert build_manifest.REFUSED and build_manifest.REFUSED[0].startswith(build_flags.MARK)


def test_hook_fails_closed_on_a_loader_it_cannot_read(monkeypatch):
    """A loader whose parameters are hidden (`*args, **kwargs` with no `__signature__`): the hook cannot bind
    the call, so it builds nothing and raises a harness fault, never a skipped check."""
    built = []
    for name in ("load_inline", "load", "_run_ninja_build", "_check_and_build_extension_h_precompiler_headers",
                 "remove_extension_h_precompiler_headers"):
        monkeypatch.setattr(cpp_extension, name, getattr(cpp_extension, name))
    monkeypatch.setattr(cpp_extension, "load_inline", lambda *a, **k: built.append(k))
    load_inline_hook.patch_load_inline("cpu", "")
    with pytest.raises(RuntimeError, match="cannot read load_inline's parameters"):
        cpp_extension.load_inline("k", [SRC], [], [], ["f"], BAD)
    assert built == []
