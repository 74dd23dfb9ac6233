"""`kernel-agent eval` end to end, through the console entry point in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "core"


def kernel_agent(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=900,
                          cwd=Path(__file__).parent.parent)


def test_eval_json_end_to_end(build_cache_dir):
    out = kernel_agent("eval", "--task", str(FIXTURES / "relu_task.py"), "--candidate", str(FIXTURES / "relu_ok.py"),
                       "--trials", "20", "--json", "--cache-dir", build_cache_dir)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "correct", result["feedback"]  # static and op checks on: a real kernel passes
    assert result["compiled"] and result["conditions"]["device"] == "cpu"
    assert result["conditions"]["timing_trials"] >= 5 and len(result["conditions"]["input_seeds"]) == 7


def test_eval_bad_arguments_exit_2(tmp_path):
    out = kernel_agent("eval", "--task", str(tmp_path / "missing.py"), "--candidate", str(FIXTURES / "relu_ok.py"))
    assert out.returncode == 2 and "error" in out.stderr
    out = kernel_agent("eval", "--task", str(FIXTURES / "relu_task.py"), "--candidate", str(tmp_path / "nope.py"))
    assert out.returncode == 2 and "cannot read candidate" in out.stderr


def test_compile_only_without_nvcc_exits_2_with_the_reason(tmp_path, monkeypatch, capsys):
    """No CUDA toolkit where the sandboxed children look is a fault of the machine, not a failed compile."""
    import os

    from cli.main import main
    from kernelbench.harness.isolation import sandbox

    monkeypatch.setattr(sandbox, "child_path", lambda: os.pathsep.join([os.path.dirname(sys.executable), str(tmp_path)]))
    code = main(["eval", "--task", str(FIXTURES / "relu_task.py"), "--candidate", str(FIXTURES / "cuda_relu.py"),
                 "--compile-only"])
    assert code == 2 and "needs nvcc" in capsys.readouterr().err
