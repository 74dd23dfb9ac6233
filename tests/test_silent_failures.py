"""No silent failures (DESIGN.md, "The harness: rules" 6): a clone anywhere judges correctly, a harness fault
is `harness_error` (never cached, never scored, retried once, loud), jobs stop when their judge is broken,
and bad input fails early with one line.

The harness is broken on purpose through `launch.CHILD_PYTHON_ENV`: the children are pointed at an
interpreter the sandbox's user cannot execute (a path inside a 0700 folder of the test's own), exactly what
a clone whose interpreter the sandbox cannot see looked like.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kernelbench.harness.build import build_cache, build_tree, builder, pch, prebuild, toolchain
from kernelbench.harness.child import build_flags, launch, load_inline_hook, prebuild as child_prebuild
from kernelbench.harness.isolation import bwrap, sandbox
from kernelbench.tasks.builtin import load_builtin
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import evaluate
from kernelbench.executors.evaluator import Evaluator, HarnessBroken
from kernelbench.executors.preflight import PreflightFailed, known_good, preflight
from kernelbench.harness.result import CORRECT, HARNESS_ERROR, EvalResult
from kernelbench.harness.static_checks import check_source
from rewards.score import kernel_score
from evals.metrics import compute_metrics
from evals.results_log import BenchRecord
from tests.bench_records import bench_record

ROOT = Path(__file__).resolve().parent.parent
GIL_RELU = (ROOT / "tests" / "fixtures" / "honest" / "relu_gil_release.py").read_text()
RELU = {t.id: t for t in load_builtin()}["L1/01_relu"]


@pytest.fixture(scope="module")
def cfg(build_cache_dir) -> EvalConfig:
    # correctness only: the question here is whether the harness judges, not how fast (timing on a busy
    # 2-core machine is noise)
    return EvalConfig(build_cache_dir=build_cache_dir, timing_trials=0)


@pytest.fixture()
def broken_python(tmp_path, monkeypatch) -> str:
    """An interpreter path the sandbox's user cannot execute: a link inside a folder only root may enter."""
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    link = hidden / "python3"
    link.symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setenv(launch.CHILD_PYTHON_ENV, str(link))
    return str(link)


def broken_env(tmp_path: Path) -> dict[str, str]:
    hidden = tmp_path / "private-cli"
    hidden.mkdir(mode=0o700, exist_ok=True)
    link = hidden / "python3"
    if not link.exists():
        link.symlink_to(os.path.realpath(sys.executable))
    return {**os.environ, launch.CHILD_PYTHON_ENV: str(link)}


# --- harness_error: detected, never cached, retried, then the same candidate is judged normally ------------

def test_child_that_cannot_start_is_harness_error_and_nothing_is_cached(cfg, broken_python, monkeypatch):
    """Cold cache for this candidate: the compile child cannot start. Then the interpreter is restored and
    the same candidate (an honest kernel whose binding releases the GIL) is `correct`, no cache cleared."""
    src = GIL_RELU + f"\n# {time.time_ns()}: a file of its own, so its import outcome is not cached yet\n"
    broken = evaluate(RELU, src, cfg)
    assert broken.status == HARNESS_ERROR and broken.retries == 1 and not broken.correct
    assert "could not start" in broken.feedback and "not your kernel's fault" in broken.feedback
    assert kernel_score(broken) is None  # never scored
    entry = Path(build_cache.cache_root(cfg)) / build_cache.cache_key(src, "cpu")
    assert not (entry / "imports" / f"{build_cache.source_key(src, 'cpu')}.json").exists()  # never cached
    monkeypatch.delenv(launch.CHILD_PYTHON_ENV)
    fixed = evaluate(RELU, src, cfg)
    assert fixed.status == CORRECT and fixed.correct and fixed.retries == 0, fixed.feedback
    assert kernel_score(fixed) == pytest.approx(0.3)  # correct, not timed: speedup 0


def test_a_candidate_cannot_pass_its_own_failure_off_as_a_harness_error(cfg):
    """It prints what a child that could not start prints and exits as one does: after the worker's `C`, that
    is the candidate's own compile_error (a harness_error would be excluded rather than scored 0)."""
    src = ("import os, sys\nsys.stderr.write('setpriv: failed to execute python3: No such file or directory\\n')\n"
           "os.closerange(3, 1024)\nos._exit(127)\nclass ModelNew:\n    pass\n"
           f"# {time.time_ns()}\n")
    r = evaluate(RELU, src, replace(cfg, static_checks=False))
    assert r.status == "compile_error" and r.retries == 0, r.feedback


def test_a_task_with_an_oversized_input_set_is_refused_at_once_with_its_size(cfg):
    """A task whose `get_inputs()` is over `EvalConfig.max_input_set_mb` is a harness error naming its size and
    the setting, before any set is drawn (on an H200 a 2 GiB set made evaluations run past 190 s, silently)."""
    honest = (ROOT / "kernelbench" / "tasks" / "solutions" / "cpu" / "L1" / "01_relu.py").read_text()
    r = evaluate(RELU, honest, replace(cfg, max_input_set_mb=1))
    assert r.status == HARNESS_ERROR, r.feedback
    assert "16 MiB ((1024, 4096))" in r.feedback and "EvalConfig.max_input_set_mb" in r.feedback, r.feedback
    assert evaluate(RELU, honest, cfg).status == CORRECT  # the same task under the default limit


def test_evaluator_stops_after_harness_errors_in_a_row(cfg, broken_python):
    task, src = known_good("cpu")
    with Evaluator(replace(cfg, harness_error_limit=2), compile_workers=1) as ev:
        first = ev.submit(task, src).result()
        assert first.status == HARNESS_ERROR and first.retries == 1
        with pytest.raises(HarnessBroken, match="2 times in a row.*could not start"):
            ev.submit(task, src).result()
        with pytest.raises(HarnessBroken):  # broken for good: no more submissions
            ev.submit(task, src)


def test_preflight_names_the_cause(cfg, broken_python):
    with pytest.raises(PreflightFailed, match="judged harness_error.*could not start"):
        preflight(cfg)


def test_harness_errors_are_left_out_of_metrics():
    def rec(traj: str, status: str, speedup: float = 0.0) -> BenchRecord:
        return bench_record("L1/x", traj, 0, EvalResult(status=status, correct=status == CORRECT, speedup=speedup))

    with_fault = compute_metrics([rec("0", CORRECT, 2.0), rec("1", HARNESS_ERROR)])
    without = compute_metrics([rec("0", CORRECT, 2.0)])
    assert with_fault["overall"] == without["overall"]  # not counted as an incorrect trajectory
    assert with_fault["harness_errors"] == 1 and with_fault["kernels"] == 1
    assert with_fault["status_counts"][HARNESS_ERROR] == 1  # always shown


# --- the build cache cannot lie -------------------------------------------------------------------------

def test_build_key_covers_the_build_code(tmp_path, monkeypatch):
    """Every file of the build logic is hashed into every entry's key: a change to any of them is a new key."""
    assert f"harness={build_cache.build_code_hash()}" in build_cache.toolchain_fingerprint("cpu")
    listed = {(build_cache.HARNESS_DIR / name).resolve() for name in build_cache.BUILD_CODE_MODULES}
    assert {Path(m.__file__).resolve() for m in (build_cache, build_tree, builder, build_flags, pch, toolchain,
                                                  load_inline_hook, prebuild, child_prebuild)} == listed
    base = build_cache.build_code_hash.__wrapped__()
    for name in build_cache.BUILD_CODE_MODULES:
        copy = tmp_path / name.replace("/", "_")
        shutil.copytree(build_cache.HARNESS_DIR, copy)
        with open(copy / name, "a") as f:
            f.write("\n# changed\n")
        monkeypatch.setattr(build_cache, "HARNESS_DIR", copy)
        assert build_cache.build_code_hash.__wrapped__() != base, name


def test_an_entry_without_its_completion_marker_is_rebuilt(cfg):
    # nothing to compile (the import child alone): the entry logic is the same, without a minute of C++
    src = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
           f"# {time.time_ns()}: entry left by a killed compile\n")
    first = builder.build(src, cfg)
    assert first.status == "ok"
    entry = Path(first.entry_dir)
    (entry / "built").unlink()  # as if the compile was killed before it finished
    shutil.rmtree(entry / "imports")
    leftover = entry / "ext" / "leftover.o"
    leftover.write_text("half an object file")
    again = builder.build(src, cfg)
    assert again.status == "ok" and not again.cached and not leftover.exists() and (entry / "built").exists()


# --- static rules judge what a kernel does, not how it is bound ----------------------------------------

def test_binding_helpers_pass_and_interpreter_access_does_not():
    assert check_source(GIL_RELU, "cpu") == []
    forged = (ROOT / "tests" / "adversarial" / "cpp_forge_times.py").read_text()
    assert "static:python_objects" in {v.flag for v in check_source(forged, "cpu")}
    for cpp in ('auto sys = py::module_::import("sys");', 'auto sys = pybind11::module::import("sys");',
                "using namespace pybind11;", 'using M = py::module_; auto s = M::import("sys");',
                "py::gil_scoped_acquire hold;", "py::object o;"):
        src = GIL_RELU.replace("PYBIND11_MODULE(", cpp + "\nPYBIND11_MODULE(", 1)
        assert {v.flag for v in check_source(src, "cpu")} & {"static:python_objects", "static:dynamic_code"}, cpp


# --- importable everywhere -----------------------------------------------------------------------------

def test_sandbox_rebinds_the_interpreter_but_never_the_temp_folder():
    paths = bwrap.child_readonly_paths()
    tmp = os.path.realpath(tempfile.gettempdir())
    assert all(not (tmp == p or tmp.startswith(p + os.sep)) for p in paths)
    assert all(p != r for p in paths for r in bwrap.hidden_roots())


def test_the_running_scripts_folder_is_not_bound_into_the_sandbox(monkeypatch, tmp_path):
    """A script run from a folder under /tmp (its build cache beside it) had that folder bound, read-only, into
    every sandbox: sys.path's first entry is the script's or working folder, which no child imports from."""
    script_dir = tmp_path / "my-experiment"
    script_dir.mkdir()
    monkeypatch.setattr(sys, "path", [str(script_dir)] + sys.path[1:])
    assert str(script_dir) not in bwrap.child_readonly_paths()
    monkeypatch.setattr(sys, "path", sys.path[:1] + [str(script_dir)] + sys.path[1:])
    assert str(script_dir) in bwrap.child_readonly_paths()  # a later entry (an editable install's source) still is


@pytest.mark.slow  # a clone, a venv and a whole evaluation in a fresh interpreter: minutes on a busy machine
def test_a_clone_in_a_temporary_folder_with_its_own_venv_judges_correctly(build_cache_dir):
    """`git clone` of this tree under /tmp (hidden from the children by the sandbox's tmpfs), a virtual
    environment there (system site-packages: nothing to install), a reference solution through the real
    sandbox with that environment's python from the clone: `correct`."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.fail("the project is not a git checkout")
    where = tempfile.mkdtemp(prefix="ka-clone-")
    try:
        clone = os.path.join(where, "clone")
        subprocess.run(["git", "clone", "-q", str(ROOT), clone], check=True, timeout=120)
        venv = os.path.join(where, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True,
                       timeout=120)
        script = ("import json, sys; from kernelbench.harness.config import EvalConfig; from kernelbench.harness.evaluate import evaluate;"
                  "from kernelbench.executors.preflight import known_good; import kernelbench;"
                  f"t, s = known_good('cpu'); r = evaluate(t, s, EvalConfig(build_cache_dir={build_cache_dir!r}, timing_trials=0));"
                  "print(json.dumps({'status': r.status, 'feedback': r.feedback, 'where': kernelbench.__file__, 'prefix': sys.prefix}))")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", launch.CHILD_PYTHON_ENV)}
        out = subprocess.run([os.path.join(venv, "bin", "python"), "-c", script], cwd=clone, env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got["where"].startswith(clone) and got["prefix"] == venv
        assert got["status"] == CORRECT, got["feedback"]
    finally:
        shutil.rmtree(where, ignore_errors=True)


# --- through the real CLI ------------------------------------------------------------------------------

def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=timeout)


def one_line_error(out: subprocess.CompletedProcess, rc: int, *words: str) -> None:
    assert out.returncode == rc, (out.returncode, out.stdout[-800:], out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    for w in words:
        assert w in out.stderr, (w, out.stderr[-2000:])


def test_cli_train_with_a_broken_harness_stops_within_a_minute(tmp_path):
    start = time.perf_counter()
    out = cli("train", "--preset", "cpu-tiny", "--steps", "1", "--out", str(tmp_path / "run"), env=broken_env(tmp_path))
    one_line_error(out, 4, "harness error", "preflight", "could not start")
    assert time.perf_counter() - start < 60 and not (tmp_path / "run").exists()


def test_cli_bench_with_a_broken_harness_stops_within_a_minute(tmp_path):
    start = time.perf_counter()
    out = cli("bench", "--backend", "hf", "--model", "unused", "--limit", "1", "--out", str(tmp_path / "b"),
              env=broken_env(tmp_path))
    one_line_error(out, 4, "harness error", "preflight", "could not start")
    assert time.perf_counter() - start < 60 and not (tmp_path / "b" / "results.jsonl").exists()


def test_cli_eval_harness_error_exits_non_zero(tmp_path):
    task, src = known_good("cpu")
    cand = tmp_path / "cand.py"
    cand.write_text(src + f"\n# {time.time_ns()}\n")
    out = cli("eval", "--task", "L1/01_relu", "--candidate", str(cand), "--json", env=broken_env(tmp_path))
    assert out.returncode == 4, out.stderr[-2000:]
    assert json.loads(out.stdout)["status"] == HARNESS_ERROR


def test_cli_compile_only_json_prints_an_eval_result(tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text(known_good("cpu")[1])  # C++ only: no cuda_sources for nvcc
    out = cli("eval", "--task", "L1/01_relu", "--candidate", str(cand), "--compile-only", "--json")
    if shutil.which("nvcc", path=sandbox.child_path()) is None:
        one_line_error(out, 2, "nvcc")
        return
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert set(EvalResult.__dataclass_fields__) <= set(got)
    assert got["status"] == "compile_error" and got["compiled"] is False and "cuda_sources" in got["feedback"]


@pytest.mark.parametrize("args, rc, words", [
    (("optimize", "{tmp}/m.py", "--device", "cuda", "--base-url", "http://127.0.0.1:9/v1", "--out", "{tmp}/o"),
     2, ("--device cuda needs a CUDA GPU",)),
    (("bench", "--device", "cuda", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", "{tmp}/b"),
     2, ("--device cuda needs a CUDA GPU",)),
    (("bench", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--limit", "1", "--out", "{tmp}/b"),
     3, ("model server error", "cannot reach")),
    (("bench", "--model", "m", "--base-url", "localhost:8000/v1", "--out", "{tmp}/b"), 2, ("http://",)),
    (("optimize", "{tmp}/m.py", "--device", "cpu", "--base-url", "localhost:8000/v1", "--out", "{tmp}/o"),
     2, ("http://",)),
    (("train", "--preset", "cpu-tiny", "--out", "{tmp}/afile"), 2, ("is an existing file",)),
    (("optimize", "{tmp}/m.py", "--device", "cpu", "--base-url", "http://x/v1", "--out", "{tmp}/afile"),
     2, ("is an existing file",)),
    (("bench", "--limit", "0", "--model", "m"), 2, ("--limit must be at least 1",)),
    (("bench", "--limit", "-1", "--model", "m"), 2, ("--limit must be at least 1",)),
    (("train", "--preset", "cpu-tiny", "--steps", "0"), 2, ("--steps must be at least 1",)),
    (("train", "--preset", "cpu-tiny", "--steps", "-3"), 2, ("--steps must be at least 1",)),
    (("sft", "--model", "tiny", "--data", "{tmp}/missing.jsonl"), 2, ("file not found",)),
    (("sft", "--model", "tiny", "--data", "solutions", "--tasks", "L1/99_nope"), 2, ("unknown task",)),
    (("train", "--config", "{tmp}/bad.yaml"), 2, ("malformed YAML",)),
    (("train", "--config", "{tmp}/missing.yaml"), 2, ("file not found",)),
    (("optimize", "{tmp}/binary.py", "--device", "cpu", "--base-url", "http://x/v1", "--out", "{tmp}/o"),
     2, ("not a text file",)),
    (("eval", "--task", "{tmp}/missing.py", "--candidate", "{tmp}/m.py"), 2, ("file not found",)),
    (("eval", "--task", "L1/01_relu", "--candidate", "{tmp}/m.py", "--size", "gpu"), 2, ("--size cpu",)),
    (("tasks", "list", "--source", "hf:nobody/NoSuchDataset"), 2, ("not in the local Hugging Face cache",)),
])
def test_cli_bad_input_fails_early_with_one_line(tmp_path, args, rc, words):
    (tmp_path / "m.py").write_text(RELU.source)
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "bad.yaml").write_text("train:\n  steps: [1, 2\n  out: x\n")
    (tmp_path / "binary.py").write_bytes(bytes(range(256)) * 4)
    start = time.perf_counter()
    out = cli(*(a.replace("{tmp}", str(tmp_path)) for a in args), timeout=60)
    one_line_error(out, rc, *words)
    assert time.perf_counter() - start < 60  # seconds on an idle machine; the bound allows a loaded one


def test_cli_optimize_refuses_another_model_into_the_same_out(tmp_path):
    (tmp_path / "m.py").write_text(RELU.source)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "config.json").write_text(json.dumps({"backend": "openai", "model": "old-model", "device": "cpu"}))
    out = cli("optimize", str(tmp_path / "m.py"), "--device", "cpu", "--base-url", "http://127.0.0.1:9/v1",
              "--model", "new-model", "--out", str(tmp_path / "o"))
    one_line_error(out, 2, "another model", "old-model")
    # refused before any work: the old run's config still credits the old model, nothing else was written
    assert json.loads((tmp_path / "o" / "config.json").read_text())["model"] == "old-model"
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["config.json"]
