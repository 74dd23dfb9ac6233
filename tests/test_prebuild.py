"""The compile child's early build: ninja starts on the parent's prediction before the child imports torch,
torch's own ninja still decides, and nothing the prediction does reaches a verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench.harness.build import builder, pch, prebuild
from kernelbench.harness.child import launch
from kernelbench.harness.config import EvalConfig

FIXTURES = Path(__file__).parent / "fixtures" / "core"
ROOT = Path(__file__).resolve().parent.parent
ENV = builder.child_env(EvalConfig(device="cpu"), "/x")


def _renamed(src: str, name: str) -> str:
    return src.replace('name="core_relu_ok"', f'name="{name}"')


@pytest.fixture(scope="module")
def clang_pch() -> str:
    folder = pch.pch_dir_for(pch.ensure_pch(device="cpu"), pch.STANDARD_CFLAGS, "cpu")
    if not folder or not pch.clang_pch_info(folder):
        pytest.skip("CPU builds run without clang's PCH on this machine: nothing is planned")
    return folder


def test_the_prediction_is_torchs_own_files_and_the_build_compiles_once(clang_pch, build_cache_dir):
    """A cold compile of the common form: the planned main.cpp and build.ninja are byte for byte what torch's
    load_inline wrote in the child (so torch's ninja found the early build up to date), and the object was
    compiled once."""
    src = _renamed((FIXTURES / "relu_ok.py").read_text().replace('["-O3"]', '["-O3", "-fopenmp"]'),
                   f"prebuild_relu_{os.getpid()}")
    cfg = EvalConfig(build_cache_dir=build_cache_dir)
    out = builder.build(src, cfg, pch_dir=pch.ensure_pch(device="cpu"))
    assert out.status == "ok" and not out.cached, out.error_text
    folder = Path(out.entry_dir, "ext", f"prebuild_relu_{os.getpid()}")
    early = prebuild.plan(src, clang_pch, str(Path(out.entry_dir, "ext")), ENV)
    assert early is not None and early["dir"] == str(folder)
    for name, text in early["files"].items():
        assert (folder / name).read_text() == text, name
    log = (folder / ".ninja_log").read_text().splitlines()
    assert [line.split("\t")[3] for line in log[1:]].count("main.o") == 1, log


def test_a_compile_error_is_reported_from_the_early_build_as_torch_reports_it(clang_pch, build_cache_dir):
    src = (FIXTURES / "relu_compile_error.py").read_text().replace('name="core_relu_compile_error"',
                                                                   f'name="prebuild_err_{os.getpid()}"').replace('["-O3"]', '["-O3", "-fopenmp"]')
    assert prebuild.plan(src, clang_pch, "/x", ENV) is not None
    out = builder.build(src, EvalConfig(build_cache_dir=build_cache_dir), pch_dir=pch.ensure_pch(device="cpu"))
    assert out.status == "compile_error"
    assert "error: expected ';' after return statement" in out.error_text, out.error_text


def test_an_early_build_the_import_never_asks_for_leaves_no_library(clang_pch, build_cache_dir):
    """A literal load_inline the import never reaches (here: under `if False`) is planned and started, then
    stopped and removed before the child reports: no library of it is left to be symbol-checked or loaded."""
    name = f"prebuild_dead_{os.getpid()}"
    src = _renamed((FIXTURES / "relu_ok.py").read_text().replace('["-O3"]', '["-O3", "-fopenmp"]'), name).replace(
        "ext = load_inline(", "if False:\n    ext = load_inline(")
    assert prebuild.plan(src, clang_pch, "/x", ENV) is not None
    out = builder.build(src, EvalConfig(build_cache_dir=build_cache_dir), pch_dir=pch.ensure_pch(device="cpu"))
    assert out.status == "ok", out.error_text
    assert not list(Path(out.entry_dir, "ext").rglob("*.so")) and not Path(out.entry_dir, "ext", name).exists()


@pytest.mark.parametrize("change", [
    lambda s: s.replace("ext = load_inline(", "other = load_inline(name='b', cpp_sources='')\next = load_inline("),
    lambda s: s.replace('cpp_sources=cpp_src', 'cpp_sources=cpp_src, cuda_sources=""'),
    lambda s: s.replace('["-O3", "-fopenmp"]', '["-O2"]'),
    lambda s: s.replace('name="core_relu_ok"', 'name="bad name"'),
    lambda s: s.replace('functions=["relu_fwd"]', 'functions={"relu_fwd": "doc"}'),
    lambda s: "import os\n" + s,
], ids=["two_calls", "cuda_sources", "other_flags", "odd_name", "docstrings", "not_literal"])
def test_only_the_common_form_is_planned(clang_pch, change):
    src = (FIXTURES / "relu_ok.py").read_text().replace('["-O3"]', '["-O3", "-fopenmp"]')
    assert prebuild.plan(src, clang_pch, "/x", ENV) is not None
    assert prebuild.plan(change(src), clang_pch, "/x", ENV) is None


def test_a_template_whose_main_cpp_differs_from_torchs_is_refused(clang_pch, monkeypatch):
    monkeypatch.setattr(prebuild, "main_cpp", lambda sources, functions: "// not torch's\n")
    recorded = prebuild._probe(clang_pch, pch.clang_pch_info(clang_pch)["flags"], ENV)
    assert recorded["ninja"] == "" and "main.cpp" in recorded["why"]


CHILD = """
import json, os, sys, time
sys.path.insert(0, {root!r})
from kernelbench.harness.child import prebuild
scratch, folder = sys.argv[1], sys.argv[2]
t = time.perf_counter()
prebuild.start(scratch)
started_s = time.perf_counter() - t
torch_loaded = "torch" in sys.modules
while_running = os.path.exists(os.path.join(folder, "out.txt"))
action = sys.argv[3]
if action == "settle":
    prebuild.settle(folder)
    print(json.dumps(dict(started_s=started_s, torch=torch_loaded, early=while_running,
                          out=open(os.path.join(folder, "out.txt")).read(), failure=prebuild.failure(folder))))
elif action == "fail":
    prebuild.settle(folder)
    first = prebuild.failure(folder)
    open(os.path.join(folder, "main.cpp"), "a").write("// changed")
    print(json.dumps(dict(first=first, after_change=prebuild.failure(folder))))
else:
    prebuild.stop()
    print(json.dumps(dict(gone=not os.path.exists(folder))))
"""


def _child(tmp_path, command: str, action: str) -> dict:
    scratch, folder = tmp_path / "scratch", tmp_path / "ext" / "x"
    scratch.mkdir()
    ninja = f"rule run\n  command = {command}\nbuild out.txt: run main.cpp\ndefault out.txt\n"
    (scratch / "prebuild.json").write_text(json.dumps({"dir": str(folder), "jobs": "1",
                                                      "files": {"main.cpp": "int x;", "build.ninja": ninja}}))
    out = subprocess.run([sys.executable, "-I", "-c", CHILD.format(root=str(ROOT)), str(scratch), str(folder), action],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not (scratch / "prebuild.json").exists()
    return json.loads(out.stdout)


def test_the_child_starts_ninja_without_torch_and_waits_for_it(tmp_path):
    seen = _child(tmp_path, "sleep 1 && echo built > $out", "settle")
    assert seen["started_s"] < 0.5 and not seen["torch"] and not seen["early"]  # started, not waited for
    assert seen["out"] == "built\n" and seen["failure"] is None


def test_a_failed_early_build_is_reported_only_while_its_files_are_the_predicted_ones(tmp_path):
    seen = _child(tmp_path, "echo 'main.cpp:1:1: error: nope' && false", "fail")
    assert "error: nope" in seen["first"] and seen["after_change"] is None


def test_an_early_build_nobody_asked_for_is_stopped_and_removed(tmp_path):
    assert _child(tmp_path, "sleep 30 && echo built > $out", "stop")["gone"]


def test_only_the_compile_child_starts_an_early_build():
    assert "prebuild.start" in " ".join(launch.child_argv("/s", prebuild=True))
    assert "prebuild" not in " ".join(launch.child_argv("/s"))


def test_identical_files_keep_their_mtimes(tmp_path):
    """Identical files keep their mtimes (a built entry's object must stay up to date for ninja)."""
    folder = tmp_path / "ext" / "x"
    folder.mkdir(parents=True)
    (folder / "main.cpp").write_text("int x;")
    os.utime(folder / "main.cpp", (1_000_000, 1_000_000))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "prebuild.json").write_text(json.dumps({"dir": str(folder), "jobs": "1", "files": {
        "main.cpp": "int x;", "build.ninja": "rule run\n  command = true\nbuild out.txt: run main.cpp\n"}}))
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from kernelbench.harness.child import prebuild; "
            f"prebuild.start({str(scratch)!r}); prebuild.settle({str(folder)!r})")
    subprocess.run([sys.executable, "-I", "-c", code], check=True, timeout=60)
    assert os.stat(folder / "main.cpp").st_mtime == 1_000_000


def test_the_template_is_recorded_anew_for_other_build_code(clang_pch, monkeypatch):
    """A template recorded by other build code (another hook, other flags) would predict files torch no longer
    writes and make every cold compile build twice: its file is named by the build code's hash (and the
    build environment's: tests/test_build_environment.py)."""
    fake = f"test{os.getpid()}"
    before = prebuild.template_key()
    monkeypatch.setattr(prebuild, "build_code_hash", lambda: fake)
    assert prebuild.template_key() != before
    path = Path(clang_pch, prebuild.TEMPLATE_FILE.format(prebuild.template_key()))
    try:
        assert not path.exists() and prebuild.template(clang_pch, ENV)
        assert path.exists()
    finally:
        path.unlink(missing_ok=True)
