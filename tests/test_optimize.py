"""`kernel-agent optimize`: argument errors, report contents, best.py choice, and the command end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dataclasses import replace

import pytest

from agent.openai_backend import OpenAIPolicy
from agent.optimize import OptimizeConfig, optimize
from agent.policy import SamplingConfig
from agent.prompts import PromptSettings
from agent.report import best_speedup_by_turn, find_best, write_report
from agent.trajectory import Trajectory, Turn
from cli.main import main
from kernelbench.harness.result import EvalResult
from tests.chat_server import ChatServer
from tests.test_episode import EXPECTED, FAST_SRC, RELU_TASK_SRC, SCRIPT, SLOW_SRC, ScriptedEvaluator

from kernelbench.executors.evaluator import Evaluator  # noqa: E402,F401  (our own module: imported, never probed)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_file(tmp_path, text=RELU_TASK_SRC) -> str:
    path = tmp_path / "my_relu.py"
    path.write_text(text)
    return str(path)


def test_file_without_the_three_names_is_a_one_line_usage_error(tmp_path, capsys):
    path = user_file(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n    pass\n")
    code = main(["optimize", path, "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "get_inputs" in err and "get_init_inputs" in err
    assert main(["optimize", str(tmp_path / "absent.py"), "--base-url", "http://x/v1"]) == 2
    assert main(["optimize", user_file(tmp_path, "def f(:\n"), "--base-url", "http://x/v1"]) == 2
    assert main(["optimize", user_file(tmp_path), "--backend", "openai"]) == 2  # no --base-url
    assert not (tmp_path / "out").exists()


def test_model_server_refusal_is_exit_3_with_one_line(tmp_path, capsys):
    # a 4xx from the server is not "no correct kernel found" (exit 1): it gets its own code and one line
    with ChatServer([{"status": 401, "error": "bad key"}]) as srv:
        code = main(["optimize", user_file(tmp_path), "--backend", "openai", "--base-url", srv.base_url,
                     "--model", "m", "--out", str(tmp_path / "out"), "--trajectories", "1", "--turns", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert len(err) == 1 and "bad key" in err[0] and "401" in err[0]


def turn(index, status, speedup=0.0, summary="s"):
    correct = status == "correct"
    result = EvalResult(status=status, correct=correct, speedup=speedup,
                        runtime_ms=1.0 / speedup if speedup else 0.0, ref_runtime_ms=1.0, feedback=f"{status} fb")
    return Turn(index=index, prompt=[], response="", reasoning="", summary=summary,
                candidate=f"# kernel {index} {speedup}", result=result, score=(0.3 + speedup) * correct)


def test_report_table_chart_and_best(tmp_path):
    trajs = [Trajectory("t", "0", (turn(0, "compile_error"), turn(1, "correct", 0.5), turn(2, "correct", 2.5))),
             Trajectory("t", "1", (turn(0, "correct", 1.2), turn(1, "incorrect"))),
             # A beam continuation: its first two turns are its parent's and must not be counted again.
             Trajectory("t", "r1/0", (turn(0, "correct", 1.2), turn(1, "incorrect"), turn(2, "correct", 3.0)),
                        inherited_turns=2, parent="1", round=1)]
    assert best_speedup_by_turn(trajs) == [1.2, 1.2, 3.0]
    best = write_report(str(tmp_path), "title", trajs, {"device": "cpu"})
    assert best.traj_id == "r1/0" and best.speedup == 3.0
    md = (tmp_path / "report.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| trajectory")]
    assert len(rows) == 6 and "**Best: 3.000x**" in md and "compile_error fb" in md
    assert (tmp_path / "best_speedup.png").read_bytes()[:4] == b"\x89PNG"
    assert find_best([Trajectory("t", "0", (turn(0, "incorrect"),))]) is None


def test_report_says_how_far_each_kernel_is_from_the_limit(tmp_path):
    def near(index, speedup, sol, bound):
        t = turn(index, "correct", speedup)
        return replace(t, result=replace(t.result, sol_fraction=sol, roofline_ms=0.25, sol_bound=bound))

    trajs = [Trajectory("t", "0", (near(0, 1.3, 0.2, "memory"), near(1, 2.1, 0.38, "memory"))),
             Trajectory("t", "1", (turn(0, "correct", 0.9),))]  # a kernel without a roofline
    write_report(str(tmp_path), "title", trajs, {"device": "cpu"})
    md = (tmp_path / "report.md").read_text()
    assert ("Speed of light: 2.1x faster than eager, at 38 % of memory bandwidth (memory-bound task; roofline "
            "0.25 ms, so at most 2.6x more to gain).") in md
    rows = [line for line in md.splitlines() if line.startswith("| 0 |")]
    assert "| 20 % of memory |" in rows[0] and "| 38 % of memory |" in rows[1]
    assert "| 1 | 1 | correct | 0.900 | 1.1111 | - |" in md


def test_optimize_writes_the_fast_kernel_as_best(tmp_path):
    out = tmp_path / "out"
    with ChatServer(SCRIPT) as srv:
        outcome = optimize(OptimizeConfig(file=user_file(tmp_path), out=str(out), device="cpu", trajectories=1,
                                          turns=4, prompt=PromptSettings(hardware="test cpu")),
                           policy=OpenAIPolicy(srv.base_url, "m", api_key=""), evaluator=ScriptedEvaluator())
    assert [t.result.status for t in outcome.trajectories[0].turns] == EXPECTED
    best = (out / "best.py").read_text()
    assert FAST_SRC.strip() in best and SLOW_SRC.strip() not in best
    assert json.loads((out / "config.json").read_text())["eval"]["size"] == "cpu"  # the resolved size
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 1
    # Nothing correct: no best.py (a stale one is removed) and the report says so.
    with ChatServer([SCRIPT[0]]) as srv:
        outcome = optimize(OptimizeConfig(file=user_file(tmp_path), out=str(out), device="cpu", trajectories=1,
                                          turns=2, sampling=SamplingConfig(seed=1, max_tokens=8192)),
                           policy=OpenAIPolicy(srv.base_url, "m", api_key=""), evaluator=ScriptedEvaluator())
    # Same OUT, same (task, trajectory): the logged trajectory is reused, so the fast kernel stays best.
    assert outcome.best is not None and len(srv.requests) == 0
    (out / "trajectories.jsonl").unlink()
    with ChatServer([SCRIPT[0]]) as srv:
        outcome = optimize(OptimizeConfig(file=user_file(tmp_path), out=str(out), device="cpu", trajectories=1,
                                          turns=2), policy=OpenAIPolicy(srv.base_url, "m", api_key=""),
                           evaluator=ScriptedEvaluator())
    assert outcome.best is None and not (out / "best.py").exists()
    assert "No correct kernel" in (out / "report.md").read_text()


@pytest.mark.slow
def test_optimize_command_end_to_end_on_cpu(tmp_path, build_cache_dir):
    out = tmp_path / "out"
    env = dict(os.environ, KERNEL_AGENT_CACHE=build_cache_dir, TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    with ChatServer(SCRIPT) as srv:
        proc = subprocess.run([sys.executable, "-m", "cli", "optimize", user_file(tmp_path), "--backend", "openai",
                               "--base-url", srv.base_url, "--model", "scripted", "--device", "cpu",
                               "--trajectories", "1", "--turns", "4", "--out", str(out)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "best:" in proc.stdout
    best = (out / "best.py").read_text()
    assert FAST_SRC.strip() in best
    md = (out / "report.md").read_text()
    for status in ("format_error", "compile_error", "correct"):
        assert status in md
    assert (out / "best_speedup.png").exists()
    # best.py runs as is and computes ReLU.
    check = ("import runpy, torch\nns = runpy.run_path('best.py')\nx = torch.randn(64, 128)\n"
             "assert torch.equal(ns['ModelNew']()(x), torch.relu(x))\nprint('ok')")
    run = subprocess.run([sys.executable, "-c", check], cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert run.stdout.strip() == "ok", run.stderr[-2000:]
    # Asked again with only code-less answers and a fresh OUT: exit 1, one line, no best.py.
    with ChatServer([SCRIPT[0]]) as srv:
        proc = subprocess.run([sys.executable, "-m", "cli", "optimize", user_file(tmp_path), "--base-url",
                               srv.base_url, "--device", "cpu", "--trajectories", "1", "--turns", "1",
                               "--out", str(tmp_path / "none")], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=600)
    assert proc.returncode == 1 and "no correct kernel" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "none" / "best.py").exists()
