"""The build cache keyed on the build environment: two interpreters sharing one cache each judge correctly.

An entry's `build.ninja` names torch's include and library paths and Python's include folder; the run child
compares the one torch writes for it with the one the compile stage built (`build_manifest`). With a key of
versions only, an interpreter whose torch lives in another folder (a virtual environment with its own
install of the same torch) was served the other's entry, and every evaluation was rejected with
`dynamic:build_outside_compile_stage`. The key now holds what torch writes into `build.ninja` and the
interpreter (`toolchain.build_environment`, `toolchain.interpreter_fingerprint`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from kernelbench.harness.build import build_cache, pch, prebuild, toolchain
from kernelbench.harness.child import launch
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import evaluate
from kernelbench.executors.preflight import known_good
from kernelbench.harness.result import CORRECT

ROOT = Path(__file__).resolve().parent.parent
SRC = (ROOT / "kernelbench" / "tasks" / "solutions" / "cpu" / "L1" / "01_relu.py").read_text()


@pytest.fixture
def fresh_environment():
    """`build_environment` is cached per process: recomputed for the patched torch, and again afterwards."""
    toolchain.build_environment.cache_clear()
    yield
    toolchain.build_environment.cache_clear()


def keys() -> tuple[str, str, str, str]:
    return (build_cache.cache_key(SRC, "cpu"), build_cache.source_key(SRC, "cpu"), str(pch.pch_folder()),
            prebuild.template_key())


def test_the_key_differs_when_an_include_path_differs(fresh_environment, monkeypatch):
    """Another torch include folder (same torch version): another entry, import outcome, PCH and template."""
    from torch.utils import cpp_extension

    before = keys()
    original = cpp_extension.include_paths
    monkeypatch.setattr(cpp_extension, "include_paths",
                        lambda *a, **k: [p.replace("site-packages", "elsewhere") for p in original(*a, **k)])
    toolchain.build_environment.cache_clear()
    after = keys()
    assert all(a != b for a, b in zip(before, after)), (before, after)
    assert "elsewhere" in toolchain.torch_ninja_text("cpu")  # torch's own writer saw it too


def test_a_difference_only_torchs_ninja_writer_knows_changes_the_key(fresh_environment, monkeypatch):
    """A flag a later torch adds to every build (here: one more linker flag) is in no named part of the key;
    it is in the `build.ninja` torch writes, whose hash the key holds."""
    from torch.utils import cpp_extension

    before = build_cache.cache_key(SRC, "cpu")
    original = cpp_extension._prepare_ldflags
    monkeypatch.setattr(cpp_extension, "_prepare_ldflags", lambda *a, **k: original(*a, **k) + ["-Wl,--as-needed"])
    toolchain.build_environment.cache_clear()
    assert build_cache.cache_key(SRC, "cpu") != before


def test_the_interpreter_keys_entries_but_not_the_pch(fresh_environment, monkeypatch):
    """Another prefix (a venv on the same torch): its own entries and import outcomes (what the child can import
    differs), the same PCH (its content is a function of compiler, headers and flags, all in its key)."""
    before = keys()
    monkeypatch.setattr(sys, "prefix", "/elsewhere/venv")
    after = keys()
    assert after[0] != before[0] and after[1] != before[1] and after[3] != before[3]
    assert after[2] == before[2]


def test_an_unavailable_torch_writer_is_said_in_the_key(fresh_environment, monkeypatch):
    """A torch whose private writer moved: the key says so and still holds the named parts."""
    from torch.utils import cpp_extension

    monkeypatch.delattr(cpp_extension, "_write_ninja_file_to_build_library")
    toolchain.build_environment.cache_clear()
    parts = toolchain.build_environment("cpu")
    assert "torch-ninja=unavailable (AttributeError)" in parts
    assert any(p.startswith("include-paths=[") for p in parts)


def test_the_cuda_key_holds_the_toolkit_and_never_touches_the_gpu(fresh_environment, monkeypatch):
    """CUDA builds: torch's writer with nvcc's flags and the toolkit's paths, an explicit arch flag so torch
    never asks the GPU from the parent (rule 11); another toolkit folder is another key."""
    import torch
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/opt/toolkit-a")
    text, first = toolchain.torch_ninja_text("cuda"), build_cache.cache_key(SRC, "cuda")
    assert "nvcc = /opt/toolkit-a/bin/nvcc" in text and "-isystem /opt/toolkit-a/include" in text
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/opt/toolkit-b")
    toolchain.build_environment.cache_clear()
    assert build_cache.cache_key(SRC, "cuda") != first
    assert not torch.cuda.is_initialized()


def venv_with_its_own_torch(where: str) -> str:
    """A virtual environment (system site-packages) whose `import torch` finds torch in the venv's own
    site-packages, as after installing the same torch there; a link to this torch, so nothing is downloaded."""
    import torch

    venv = os.path.join(where, "venv")
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv],
                          capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"cannot create a virtual environment here: {made.stderr.strip()[-300:]}")
    site = sysconfig.get_path("purelib", vars={"base": venv, "platbase": venv})
    os.symlink(os.path.dirname(torch.__file__), os.path.join(site, "torch"))
    return os.path.join(venv, "bin", "python")


@pytest.mark.slow  # a venv, a PCH for its torch folder and two compiles: minutes on a busy machine
def test_system_then_venv_then_system_on_one_cache_are_all_correct(tmp_path):
    """system -> venv -> system on one build cache: `correct` three times; the venv builds an entry of its
    own, and the system's third evaluation is served from its first."""
    where = tempfile.mkdtemp(prefix="ka-envkey-")
    try:
        python = venv_with_its_own_torch(where)
        task, src = known_good("cpu")
        config = EvalConfig(build_cache_dir=str(tmp_path / "builds"), timing_trials=0)
        first = evaluate(task, src, config)
        script = ("import json, sys, torch; from kernelbench.harness.config import EvalConfig; "
                  "from kernelbench.harness.evaluate import evaluate; from kernelbench.executors.preflight import known_good; "
                  f"t, s = known_good('cpu'); r = evaluate(t, s, EvalConfig(build_cache_dir={config.build_cache_dir!r}, "
                  "timing_trials=0)); print(json.dumps({'status': r.status, 'flags': list(r.flags), 'cached': r.cached_build, "
                  "'feedback': r.feedback, 'torch': torch.__file__, 'prefix': sys.prefix}))")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", launch.CHILD_PYTHON_ENV)}
        env["KERNEL_AGENT_PCH_DIR"] = os.path.join(where, "pch")  # the venv's PCH goes with it
        out = subprocess.run([python, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr[-2000:]
        second = json.loads(out.stdout.strip().splitlines()[-1])
        assert second["torch"].startswith(where) and second["prefix"].startswith(where)
        third = evaluate(task, src, config)
        statuses = [first.status, second["status"], third.status]
        assert statuses == [CORRECT] * 3, (statuses, second["flags"], second["feedback"][-1500:])
        assert not second["cached"] and third.cached_build  # the venv's own entry; the system's served again
        assert len([p for p in (tmp_path / "builds").iterdir() if p.is_dir()]) == 2
    finally:
        shutil.rmtree(where, ignore_errors=True)
