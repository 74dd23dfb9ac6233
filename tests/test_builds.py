"""The compile stage: cache keys, cache hits, error extraction, the child's load_inline hook, nvcc compile-only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench.harness.build import build_cache, build_tree, builder, nvcc_check, pch, toolchain
from kernelbench.harness.isolation import sandbox
from kernelbench.harness.child import load_inline_hook
from kernelbench.harness.config import EvalConfig

FIXTURES = Path(__file__).parent / "fixtures" / "core"


def test_cache_key_depends_on_source_and_device():
    a = build_cache.cache_key("x = 1", "cpu")
    assert a == build_cache.cache_key("x = 1", "cpu")
    assert a != build_cache.cache_key("x = 2", "cpu")
    assert a != build_cache.cache_key("x = 1", "cuda")


def test_build_is_cached_by_source(build_cache_dir):
    cfg = EvalConfig(build_cache_dir=build_cache_dir)
    src = (FIXTURES / "relu_ok.py").read_text().replace('["-O3"]', '["-O3", "-fopenmp"]')
    folder = pch.ensure_pch(device="cpu")  # the standard flags' PCH (the suite's other builds use it too)
    first = builder.build(src, cfg, pch_dir=folder)
    assert first.status == "ok", first.error_text
    second = builder.build(src, cfg, pch_dir=folder)
    assert second.status == "ok" and second.cached and second.compile_s < 1.0
    assert list((Path(second.entry_dir) / "ext").rglob("*.so"))


def test_error_lines_keep_errors_and_drop_command_lines():
    log = "\n".join(["[1/2] c++ -MMD -MF main.o.d -O3 -isystem /a/very/long/include main.cpp",
                     "FAILED: main.o", "main.cpp: In function 'f':",
                     "main.cpp:3:5: error: expected ';' before '}' token", "    3 | }", "      | ^",
                     "ninja: build stopped: subcommand failed."])
    text = toolchain.extract_error_lines(log)
    assert "error: expected ';'" in text and "In function" in text
    assert "-MMD" not in text and "FAILED" not in text


def test_child_load_inline_gets_pch_and_standard_flags():
    code = ("from torch.utils import cpp_extension as ce\n"
            "seen = []\n"
            "import inspect\n"
            "def stub(*a, **k): seen.append(k)\n"
            "stub.__signature__ = inspect.signature(ce.load_inline)  # the hook binds calls to torch's signature\n"
            "ce.load_inline = stub\n"
            "from kernelbench.harness.child import load_inline_hook\n"
            "load_inline_hook.patch_load_inline('cpu', '/pchdir')\n"
            "ce.load_inline(name='a', cpp_sources='')\n"
            "ce.load_inline(name='b', cpp_sources='', extra_cflags=['-O2'])\n"
            "ce.remove_extension_h_precompiler_headers()\n"
            "print(seen)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = eval(out.stdout.strip())
    assert seen[0]["extra_include_paths"] == ["/pchdir"] and seen[0]["extra_cflags"] == list(load_inline_hook.STANDARD_CFLAGS)
    assert seen[1]["extra_cflags"] == ["-O2"] and seen[1]["use_pch"] is False


def _with_flags(flags: str) -> str:
    return (FIXTURES / "relu_ok.py").read_text().replace('extra_cflags=["-O3"]', flags)


def test_pch_flags_reads_allowed_flag_sets_only():
    assert pch.pch_flags(_with_flags('extra_cflags=["-O3"]')) == ("-O3",)
    assert pch.pch_flags(_with_flags('extra_cflags=["-O3", "", "-fopenmp"]')) == ("-O3", "-fopenmp")
    assert pch.pch_flags(_with_flags("verbose=False")) == load_inline_hook.STANDARD_CFLAGS  # none given: the hook's
    # the parent runs gcc with these flags outside the sandbox: anything but optimisation switches gets none
    assert pch.pch_flags(_with_flags('extra_cflags=["-O3", "-fplugin=/tmp/x.so"]')) is None
    assert pch.pch_flags(_with_flags('extra_cflags=["-O3", "-I/etc"]')) is None
    assert pch.pch_flags(_with_flags('extra_cflags=["-O" + str(3)]')) is None  # not a literal
    two = _with_flags('extra_cflags=["-O3"]') + '\next2 = load_inline(name="b", cpp_sources="", extra_cflags=["-O2"])\n'
    assert pch.pch_flags(two) is None
    positional = ('from torch.utils.cpp_extension import load_inline\n'
                  'ext = load_inline("n", "", None, None, ["f"], ["-O2"])\n')
    assert pch.pch_flags(positional) == ("-O2",)  # extra_cflags is load_inline's 6th parameter
    # and the PCH builders refuse other flags themselves (they run the compiler outside the sandbox)
    assert pch.clang_pch_dir(Path("/nonexistent"), ("-O3", "-fplugin=/tmp/x.so")) == ""


@pytest.fixture
def compiler(monkeypatch):
    """Choose the CPU compiler for one test (`toolchain.clang_cxx` is cached per process)."""
    def choose(name: str) -> str:
        monkeypatch.setenv("KERNEL_AGENT_CPU_CXX", name)
        toolchain.clang_cxx.cache_clear()
        return toolchain.clang_cxx()
    yield choose
    monkeypatch.delenv("KERNEL_AGENT_CPU_CXX", raising=False)
    toolchain.clang_cxx.cache_clear()


def test_a_build_with_other_flags_uses_a_pch_made_for_them(build_cache_dir, compiler):
    """`-O3` alone cannot use the standard PCH (`-fopenmp` defines macros torch's headers test): the parent
    builds one for that flag set, and gcc uses it when the build's own compile command runs again."""
    from kernelbench.harness.evaluate import compile_stage
    from kernelbench.tasks.task import Task

    assert compiler("gcc") == ""  # the gcc route, as on a machine without clang

    task = Task(id="t/relu", level=1, name="relu", origin="test", source=(FIXTURES / "relu_task.py").read_text())
    src = (FIXTURES / "relu_ok.py").read_text().replace('"core_relu_ok"', '"core_relu_pch"')  # its own build
    staged = compile_stage(task, src, EvalConfig(build_cache_dir=build_cache_dir))
    assert staged.build is not None and staged.build.status == "ok", staged.build
    assert staged.build.pch_dir, "no PCH folder"
    assert list(Path(staged.build.pch_dir, "torch", "extension.h.gch").glob("*.gch"))
    # replay the compile of main.cpp exactly as load_inline ran it, asking gcc which headers it read
    # (`-H`: a PCH it used is marked "!", one it rejected "x")
    import shlex

    ext = next(Path(staged.build.entry_dir, "ext").iterdir())
    command = subprocess.run(["ninja", "-t", "commands", "main.o"], cwd=ext, capture_output=True, text=True,
                             timeout=60).stdout.strip().splitlines()[-1]
    replay = subprocess.run(shlex.split(command) + ["-fsyntax-only", "-H"], cwd=ext, capture_output=True,
                            text=True, timeout=600)
    used = [ln for ln in replay.stderr.splitlines() if ln.startswith("! ") and "extension.h.gch" in ln]
    assert used, replay.stderr[:2000]


def test_extract_cuda_sources_reads_literals_without_running():
    src = ('from torch.utils.cpp_extension import load_inline\n'
           'HEAD = "// head\\n"\n'
           'body = HEAD + "__global__ void k() {}"\n'
           'raise SystemExit("never executed")\n'
           'ext = load_inline(name="x", cpp_sources="", cuda_sources=body, functions=[])\n'
           'other = load_inline("y", "", "".join(["dynamic"]))\n')
    assert nvcc_check.extract_cuda_sources(src) == ["// head\n__global__ void k() {}"]


def test_compile_only_without_cuda_sources_reports_it():
    check = nvcc_check.nvcc_compile_check((FIXTURES / "relu_ok.py").read_text())
    assert not check.ok and check.sources == 0 and "no literal cuda_sources" in check.log


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_nvcc_compile_only_of_a_cuda_candidate():
    check = nvcc_check.nvcc_compile_check((FIXTURES / "cuda_relu.py").read_text())
    assert check.ok and check.sources == 1, check.log


def _stub_load_inline() -> str:
    """Child code that replaces torch's load_inline by a recorder with its signature (as kernel_calls' wrapper
    shows it), so patch_load_inline's choices can be read without compiling."""
    return ("import inspect, os\n"
            "from torch.utils import cpp_extension as ce\n"
            "seen = []\n"
            "real = ce.load_inline\n"
            "def stub(*a, **k):\n"
            "    seen.append(dict(k, args=list(a), CXX=os.environ.get('CXX')))\n"
            "stub.__signature__ = inspect.signature(real)\n"
            "ce.load_inline = stub\n"
            "from kernelbench.harness.child import load_inline_hook\n")


def test_child_builds_with_clang_only_for_the_flags_of_its_pch(tmp_path):
    """A clang PCH folder names its compiler and flags: a call with exactly those flags (positional or not)
    builds with clang and `-include-pch`; any other call, or a CUDA build, keeps gcc and the include path
    (clang would reject a PCH made with other flags, where gcc falls back to the header)."""
    pch_path = tmp_path / "clang-x"
    pch_path.mkdir()
    (pch_path / "extension.pch").write_text("")
    (pch_path / "build.json").write_text('{"cxx": "/usr/bin/clang++", "flags": ["-O3", "-fopenmp"]}')
    code = _stub_load_inline() + (
        f"load_inline_hook.patch_load_inline('cpu', {str(pch_path)!r})\n"
        "ce.load_inline(name='a', cpp_sources='')\n"  # no flags: STANDARD_CFLAGS, those of the PCH
        "ce.load_inline('b', '', None, None, ['f'], ['-O3', '', '-fopenmp'])\n"  # positional, with an empty flag
        "ce.load_inline(name='c', cpp_sources='', extra_cflags=['-O3'])\n"  # another flag set
        "assert 'CXX' not in os.environ\n"
        "ce.load_inline = stub\n"  # a CUDA child's own patch
        f"load_inline_hook.patch_load_inline('cuda', {str(pch_path)!r})\n"
        "ce.load_inline(name='d', cpp_sources='')\n"
        "print(seen)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    a, b, c, d = eval(out.stdout.strip().splitlines()[-1])
    include = ["-include-pch", str(pch_path / "extension.pch")]
    assert a["CXX"] == "/usr/bin/clang++" and a["extra_cflags"] == ["-O3", "-fopenmp"] + include
    assert a["extra_ldflags"] == ["-fopenmp"] and "extra_include_paths" not in a  # libomp named at link time
    assert b["CXX"] == "/usr/bin/clang++" and b["extra_cflags"][-2:] == include and b["args"] == []
    assert c["CXX"] is None and c["extra_cflags"] == ["-O3"] and c["extra_include_paths"] == [str(pch_path)]
    assert d["CXX"] is None and "-include-pch" not in d["extra_cflags"]


def test_cpu_compiler_choice_and_fallback(compiler, monkeypatch, tmp_path):
    """clang when installed with libomp, else gcc; the choice is part of every CPU cache key, and only an
    allowlisted flag set on a CPU build gets clang's PCH folder (gcc's otherwise)."""
    src = (FIXTURES / "relu_ok.py").read_text()
    assert compiler("gcc") == ""
    gcc_key, gcc_fp = build_cache.cache_key(src, "cpu"), build_cache.toolchain_fingerprint("cpu")
    assert "cpu-cxx" not in gcc_fp
    assert pch.pch_dir_for("/gcc-folder", ("-O3",), "cpu") == "/gcc-folder"
    monkeypatch.setattr(sandbox, "child_path", lambda: str(tmp_path))  # no clang++ on the PATH
    assert compiler("auto") == ""
    assert build_cache.cache_key(src, "cpu") == gcc_key
    monkeypatch.undo()
    if not compiler("auto"):
        pytest.skip("clang++ with libomp is not installed")
    assert build_cache.cache_key(src, "cpu") != gcc_key and "clang" in build_cache.toolchain_fingerprint("cpu")
    assert build_cache.toolchain_fingerprint("cuda") == "\n".join(toolchain.gcc_fingerprint("cuda")
                                                             + toolchain.interpreter_fingerprint()
                                                             + [f"harness={build_cache.build_code_hash()}"])
    made = []
    monkeypatch.setattr(pch, "clang_pch_dir", lambda folder, flags: made.append(flags) or f"{folder}/clang")
    assert pch.pch_dir_for("/f", ("-O3",), "cpu") == "/f/clang" and made == [("-O3",)]
    assert pch.pch_dir_for("/f", None, "cpu") == "/f"  # flags not allowlisted: gcc
    assert pch.pch_dir_for("/f", ("-O3",), "cuda") == "/f"  # CUDA builds keep gcc
    monkeypatch.setattr(pch, "CLANG_OPENMP", False)  # the run child cannot host libomp yet: gcc
    assert pch.pch_dir_for("/f", ("-O3", "-fopenmp"), "cpu") == "/f"
    monkeypatch.setattr(pch, "CLANG_OPENMP", True)
    assert pch.pch_dir_for("/f", ("-O3", "-fopenmp"), "cpu") == "/f/clang"
    assert "-fpch-instantiate-templates" in pch.pch_command("x", ("-O3",), toolchain.clang_cxx())
    assert "-fpch-instantiate-templates" not in pch.pch_command("x", ("-O3",))


def test_libomp_pool_starts_before_the_candidate(tmp_path, compiler):
    """`start_libomp_pool` (for the run child, before its thread baseline) starts libomp's workers for a
    clang `-fopenmp` build, and nothing for a gcc folder."""
    if not compiler("auto"):
        pytest.skip("clang++ with libomp is not installed")
    pch_path = tmp_path / "clang-x"
    pch_path.mkdir()
    (pch_path / "build.json").write_text(json.dumps({"cxx": toolchain.clang_cxx(), "flags": ["-O3", "-fopenmp"],
                                                "libomp": toolchain.libomp_path()}))
    code = ("import os\n"
            "from kernelbench.harness.child import load_inline_hook\n"
            "n = lambda: len(os.listdir('/proc/self/task'))\n"
            f"before = n(); load_inline_hook.start_libomp_pool({str(tmp_path)!r}); gcc = n()\n"
            f"load_inline_hook.start_libomp_pool({str(pch_path)!r}); print(before, gcc, n())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": "3"})
    assert out.returncode == 0 and "OMP:" not in out.stderr, out.stderr
    before, gcc, clang = map(int, out.stdout.split())
    assert gcc == before and clang == before + 2  # the team of 3: this thread and two workers, kept


OPENMP_CANDIDATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = """
#include <omp.h>
torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::full_like(xc, -1.f);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    int team = 0, distinct = 0;
    int seen[256] = {0};
    #pragma omp parallel reduction(+:team)
    {
        team += 1;  // counted without the runtime's functions
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        seen[t & 255] = 1;  // omp_* bound to another runtime (torch's libgomp) would give every thread 0 of 1
        for (int64_t i = t; i < n; i += nt) o[i] = in[i] > 0.f ? in[i] : 0.f;
    }
    for (int i = 0; i < 256; ++i) distinct += seen[i];
    TORCH_CHECK(distinct == team && team == omp_get_max_threads(), "OpenMP team ", team, ", thread ids ", distinct);
    return out;
}
"""

ext = load_inline(name="core_relu_openmp", cpp_sources=cpp_src, functions=["relu_fwd"],
                  extra_cflags=["-O3", "-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_fwd(x)
'''


def _clang_build_dir(build_cache_dir: str, src: str, name: str, flags: tuple[str, ...]) -> tuple[Path, str]:
    entry = Path(build_cache_dir, build_cache.cache_key(src, "cpu"), "ext", name)
    pch_path = Path(pch.pch_dir_for(pch.ensure_pch(flags, "cpu"), flags, "cpu"))
    return entry, str(pch_path / "extension.pch")


def test_a_cpu_build_runs_clang_with_the_pch_for_its_flags(build_cache_dir, compiler):
    """On a machine with clang, an `-O3` candidate compiles with clang and the PCH made for exactly `-O3`,
    evaluates correct, and the run child (same PCH folder, same choice) finds the build current."""
    from kernelbench.harness.evaluate import evaluate
    from kernelbench.tasks.task import Task

    if not compiler("auto"):
        pytest.skip("clang++ with libomp is not installed")
    task = Task(id="t/relu", level=1, name="relu", origin="test", source=(FIXTURES / "relu_task.py").read_text())
    src = (FIXTURES / "relu_ok.py").read_text().replace('"core_relu_ok"', '"core_relu_clang"')
    result = evaluate(task, src, EvalConfig(build_cache_dir=build_cache_dir))
    assert result.status == "correct", result.feedback
    entry, pch_path = _clang_build_dir(build_cache_dir, src, "core_relu_clang", ("-O3",))
    ninja = (entry / "build.ninja").read_text()
    assert f"cxx = {toolchain.clang_cxx()}" in ninja and f"-O3 -include-pch {pch_path}" in ninja
    log = (entry / ".ninja_log").read_text().split()
    assert log.count("main.o") == 1, log  # built once: the run child found the compile child's build current


@pytest.mark.skipif(not pch.CLANG_OPENMP, reason="`-fopenmp` builds keep gcc until the run child supports "
                                                     "libomp (pch.CLANG_OPENMP)")
def test_an_openmp_build_with_clang_and_its_pch_runs_beside_torch(build_cache_dir, compiler):
    """clang builds an `-O3 -fopenmp` candidate with the PCH made for those flags, and the extension's
    OpenMP (libomp) runs correctly with several threads in the run child, beside torch's libgomp, without
    OpenMP runtime errors or threads charged to the candidate."""
    from kernelbench.harness.evaluate import evaluate
    from kernelbench.tasks.task import Task

    if not compiler("auto"):
        pytest.skip("clang++ with libomp is not installed")
    task = Task(id="t/relu", level=1, name="relu", origin="test", source=(FIXTURES / "relu_task.py").read_text())
    result = evaluate(task, OPENMP_CANDIDATE, EvalConfig(build_cache_dir=build_cache_dir, threads=3))
    assert result.status == "correct", result.feedback
    entry, pch_path = _clang_build_dir(build_cache_dir, OPENMP_CANDIDATE, "core_relu_openmp", ("-O3", "-fopenmp"))
    assert f"-include-pch {pch_path}" in (entry / "build.ninja").read_text()


# --- the build folder is the candidate's: nothing follows a link in it ------------------------------------

def test_import_tree_keeps_regular_files_and_never_follows_links(tmp_path):
    """What a compile child leaves comes back as folders and regular files only: links (to files or
    folders outside), fifos and torch's `lock` batons stay behind; mtimes survive (ninja compares them)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "lock").write_text("precious")
    (victim / "secret").write_text("precious")
    src = tmp_path / "ext"
    (src / "op" / "sub").mkdir(parents=True)
    (src / "op" / "op.so").write_bytes(b"\x7fELF" + b"\0" * 100)
    (src / "op" / "lock").write_text("")
    os.utime(src / "op" / "op.so", ns=(1_000_000_123, 1_000_000_123))
    os.symlink(victim, src / "planted")
    os.symlink(victim / "secret", src / "op" / "main.o")
    os.mkfifo(src / "op" / "fifo")
    copied = build_tree.import_tree(str(src), str(tmp_path / "out"))
    got = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*"))
    assert got == ["op", "op/op.so", "op/sub"] and copied == 104
    assert (tmp_path / "out" / "op" / "op.so").stat().st_mtime_ns == 1_000_000_123
    assert sorted(p.name for p in victim.iterdir()) == ["lock", "secret"]
    with pytest.raises(build_tree.BuildTreeError):  # bounded: a child cannot fill the cache's disk
        build_tree.import_tree(str(src), str(tmp_path / "small"), build_tree.TreeBounds(max_total_bytes=50))


def test_pch_flag_lists_are_normalised_to_a_fixed_set():
    """Duplicates and order do not make a new PCH (`["-O3"] * k` was one ~170 MB PCH per k), and only the
    fixed flag sets get one at all."""
    assert load_inline_hook.normal_flags(["-O3", "-O3", "", "-fopenmp", "-O3"]) == ("-O3", "-fopenmp")
    assert pch.pch_flags(_with_flags('extra_cflags=["-fopenmp", "-O3", "-O3"]')) == ("-O3", "-fopenmp")
    assert pch.pch_flags(_with_flags('extra_cflags=["-O3", "-O3", "-O3", "-O3"]')) == ("-O3",)
    # allowlisted tokens, but not a fixed set: no PCH of their own
    assert pch.pch_flags(_with_flags('extra_cflags=["-O1", "-g0", "-funroll-loops"]')) is None
    assert pch.pch_flags(_with_flags('extra_cflags=["-O3", "-O0"]')) is None  # two levels: order would matter
    assert all(sum(f.startswith("-O") for f in s) == 1 for s in pch.PCH_FLAG_SETS)
    assert pch.clang_pch_dir(Path("/nonexistent"), ("-O1", "-g0")) == ""


def test_pch_eviction_keeps_the_standard_set_and_the_newest(tmp_path):
    folder = tmp_path / "pch"
    gch = folder / "torch" / "extension.h.gch"
    gch.mkdir(parents=True)
    sets = [load_inline_hook.normal_flags(load_inline_hook.STANDARD_CFLAGS), ("-O2",), ("-O3",), ("-O2", "-fopenmp")]
    for i, flags in enumerate(sets):
        (gch / f"{pch._flags_hash(flags)}.gch").write_bytes(b"\0" * (1 << 20))
        pch._mark_used(folder, flags)
        stamp = folder / "used" / pch._flags_hash(flags)
        os.utime(stamp, (1000 + i, 1000 + i))  # used in list order: ("-O2",) longest ago after the standard
    removed = pch.evict_pchs(folder, keep=("-O2", "-fopenmp"), quota_mb=2)
    assert [Path(p).name for p in removed] == [f"{pch._flags_hash(f)}.gch" for f in (("-O2",), ("-O3",))]
    left = {p.name for p in gch.iterdir()}
    assert left == {f"{pch._flags_hash(f)}.gch" for f in (sets[0], sets[3])}


def test_pch_is_built_sandboxed_and_brought_back_as_a_regular_file(tmp_path):
    """A PCH command runs in a sandboxed child; only a regular file comes back (a link the command
    left in its place is refused, never followed)."""
    header = next(iter(sorted(Path("/usr/include/c++").glob("*/vector"))))
    dest = tmp_path / "vector.gch"
    assert pch.build_pch_sandboxed(["c++", "-x", "c++-header", str(header), "-o", "out.gch"], "out.gch", dest,
                                      timeout_s=300)
    assert dest.is_file() and not dest.is_symlink() and dest.stat().st_size > 1000
    (tmp_path / "outside").write_text("host file")
    linked = tmp_path / "linked.gch"
    assert not pch.build_pch_sandboxed(["ln", "-s", str(tmp_path / "outside"), "out.gch"], "out.gch", linked)
    assert not linked.exists() and (tmp_path / "outside").read_text() == "host file"


PYTHON_ONLY = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''
FORGE_FRAME = '''
import json
import os
import stat
import struct

payload = json.dumps({"ok": True}).encode()
for name in os.listdir("/proc/self/fd"):
    try:
        if stat.S_ISFIFO(os.fstat(int(name)).st_mode):
            os.write(int(name), b"KAR1" + struct.pack(">IHQ", 0, 6, len(payload)) + b"result" + payload)
    except OSError:
        pass
''' + PYTHON_ONLY
RESULT_FILE_THEN_EXIT = '''
import json
import os

with open("result.json", "w") as f:
    json.dump({"ok": True}, f)
os._exit(0)
''' + PYTHON_ONLY


@pytest.mark.parametrize("src,status,text", [
    (PYTHON_ONLY, "ok", ""),
    # a frame of the candidate's own (no nonce), then the harness's: the pipe carries two reports
    (FORGE_FRAME, "rejected", "report channel carried bytes after the final report"),
    # the old file channel believed this (its reader checked no nonce): no report on the pipe, no result
    (RESULT_FILE_THEN_EXIT, "compile_error", "without a result"),
], ids=["honest", "forged_frame", "result_file_then_exit"])
def test_compile_outcome_comes_only_from_the_parents_pipe(tmp_path, src, status, text):
    """The compile child's outcome is the one report the harness sends over the parent's pipe with the job's
    nonce; a result file in its scratch folder or frames of the candidate's own never make a build `ok`."""
    out = builder.build(src, EvalConfig(build_cache_dir=str(tmp_path)))
    assert out.status == status and text in out.error_text, out.error_text
    cached = [json.loads(p.read_text())["status"] for p in Path(out.entry_dir, "imports").glob("*.json")]
    assert cached == ([] if status == "rejected" else [status])  # a tampered report is never cached
