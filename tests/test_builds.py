"""The compile stage: cache keys, cache hits, error extraction, the child's load_inline hook, nvcc compile-only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench import builds
from kernelbench.config import EvalConfig

FIXTURES = Path(__file__).parent / "fixtures" / "core"


def test_cache_key_depends_on_source_and_device():
    a = builds.cache_key("x = 1", "cpu")
    assert a == builds.cache_key("x = 1", "cpu")
    assert a != builds.cache_key("x = 2", "cpu")
    assert a != builds.cache_key("x = 1", "cuda")


def test_build_is_cached_by_source(build_cache_dir):
    cfg = EvalConfig(build_cache_dir=build_cache_dir)
    src = (FIXTURES / "relu_ok.py").read_text()
    first = builds.build(src, cfg)
    assert first.status == "ok", first.error_text
    second = builds.build(src, cfg)
    assert second.status == "ok" and second.cached and second.compile_s < 1.0
    assert list((Path(second.entry_dir) / "ext").rglob("*.so"))


def test_error_lines_keep_errors_and_drop_command_lines():
    log = "\n".join(["[1/2] c++ -MMD -MF main.o.d -O3 -isystem /a/very/long/include main.cpp",
                     "FAILED: main.o", "main.cpp: In function 'f':",
                     "main.cpp:3:5: error: expected ';' before '}' token", "    3 | }", "      | ^",
                     "ninja: build stopped: subcommand failed."])
    text = builds.extract_error_lines(log)
    assert "error: expected ';'" in text and "In function" in text
    assert "-MMD" not in text and "FAILED" not in text


def test_child_load_inline_gets_pch_and_standard_flags():
    code = ("from torch.utils import cpp_extension as ce\n"
            "seen = []\n"
            "ce.load_inline = lambda *a, **k: seen.append(k)\n"
            "from kernelbench import builds\n"
            "builds.patch_load_inline('cpu', '/pchdir')\n"
            "ce.load_inline(name='a', cpp_sources='')\n"
            "ce.load_inline(name='b', cpp_sources='', extra_cflags=['-O2'])\n"
            "ce.remove_extension_h_precompiler_headers()\n"
            "print(seen)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = eval(out.stdout.strip())
    assert seen[0]["extra_include_paths"] == ["/pchdir"] and seen[0]["extra_cflags"] == list(builds.STANDARD_CFLAGS)
    assert seen[1]["extra_cflags"] == ["-O2"] and seen[1]["use_pch"] is False


def _with_flags(flags: str) -> str:
    return (FIXTURES / "relu_ok.py").read_text().replace('extra_cflags=["-O3"]', flags)


def test_pch_flags_reads_allowed_flag_sets_only():
    assert builds.pch_flags(_with_flags('extra_cflags=["-O3"]')) == ("-O3",)
    assert builds.pch_flags(_with_flags('extra_cflags=["-O3", "", "-fopenmp"]')) == ("-O3", "-fopenmp")
    assert builds.pch_flags(_with_flags("verbose=False")) == builds.STANDARD_CFLAGS  # none given: the hook's
    # the parent runs gcc with these flags outside the sandbox: anything but optimisation switches gets none
    assert builds.pch_flags(_with_flags('extra_cflags=["-O3", "-fplugin=/tmp/x.so"]')) is None
    assert builds.pch_flags(_with_flags('extra_cflags=["-O3", "-I/etc"]')) is None
    assert builds.pch_flags(_with_flags('extra_cflags=["-O" + str(3)]')) is None  # not a literal
    two = _with_flags('extra_cflags=["-O3"]') + '\next2 = load_inline(name="b", cpp_sources="", extra_cflags=["-O2"])\n'
    assert builds.pch_flags(two) is None


def test_a_build_with_other_flags_uses_a_pch_made_for_them(build_cache_dir):
    """`-O3` alone cannot use the standard PCH (`-fopenmp` defines macros torch's headers test): the parent
    builds one for that flag set, and gcc uses it when the build's own compile command runs again."""
    from kernelbench.evaluate import compile_stage
    from kernelbench.task import Task

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
    assert builds.extract_cuda_sources(src) == ["// head\n__global__ void k() {}"]


def test_compile_only_without_cuda_sources_reports_it():
    check = builds.nvcc_compile_check((FIXTURES / "relu_ok.py").read_text())
    assert not check.ok and check.sources == 0 and "no literal cuda_sources" in check.log


@pytest.mark.slow
@pytest.mark.skipif(not builds.shutil.which("nvcc"), reason="needs nvcc")
def test_nvcc_compile_only_of_a_cuda_candidate():
    check = builds.nvcc_compile_check((FIXTURES / "cuda_relu.py").read_text())
    assert check.ok and check.sources == 1, check.log
