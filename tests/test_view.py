"""`kernel-agent view`, and tokens and cost in a bench run.

One small bench run is recorded for the module through the scripted chat-completions server on loopback
(real compile, real harness): two CPU tasks, one trajectory of two turns each, giving rejected kernels
(their flags), a format error and a correct kernel. Its metrics.json is checked for tokens and
cost; its page is built by the CLI, checked for being self-contained, and rendered in headless Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agent.trajectory import Trajectory, Turn
from cli.main import main
from evals.results_log import ResultsLog
from evals.viewer import embed_json, load_run
from kernelbench.harness.result import EvalResult
from tests.bench_records import bench_record
from tests.chat_server import ChatServer, usage_of
from tests.test_bench import ABS, NO_CODE, TASK, answer

REPO = Path(__file__).resolve().parents[1]
TASKS = {"1_relu_max": ("VIEW_RELU", "relu by torch.relu", "torch.relu(x)"),
         "3_abs": ("VIEW_ABS", "absolute value", "torch.abs(x)")}
# A kernel the static checks reject (a try/except fallback), with a URL in a comment: the page must
# show it as text without the file holding a link.
REJECTED = ABS.replace("    def forward(self, x):\n        return ext.abs_fwd(x.contiguous())",
                       "    def forward(self, x):\n        # see https://example.com/abs-notes\n"
                       "        try:\n            return ext.abs_fwd(x.contiguous())\n"
                       "        except RuntimeError:\n            return torch.abs(x)")
PRICE_IN, PRICE_OUT = 2.5, 10.0


def view_script(body: dict) -> dict:
    prompt = body["messages"][-1]["content"]
    turn = prompt.count("### Attempt")
    if "VIEW_ABS" in prompt:
        code = answer(REJECTED, "abs with a safety net") if turn == 0 else answer(ABS, "plain abs loop")
    else:  # statuses the harness gives without running anything: one compile and one run in all
        code = NO_CODE if turn == 0 else answer(REJECTED, "relu by way of abs, with a safety net")
    return {"content": code, "reasoning_content": f"Turn {turn}: the reference is elementwise, one pass will do."}


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory, build_cache_dir):
    tmp = tmp_path_factory.mktemp("view")
    folder = tmp / "kb" / "level1"
    folder.mkdir(parents=True)
    for name, (marker, doc, expr) in TASKS.items():
        (folder / f"{name}.py").write_text(TASK.format(marker=marker, doc=doc, expr=expr))
    out = tmp / "run"
    with ChatServer(view_script) as srv:
        code = main(["bench", "--tasks", f"kernelbench:{tmp / 'kb'}:all", "--backend", "openai", "--base-url",
                     srv.base_url, "--model", "scripted", "--trajectories", "1", "--turns", "2", "--device", "cpu",
                     "--out", str(out), "--build-cache", build_cache_dir, "--timing-trials", "5",
                     "--no-compile-baseline", "--quiet", "--price-in", str(PRICE_IN), "--price-out", str(PRICE_OUT)])
    assert code == 0
    return {"out": out, "requests": list(srv.requests)}


def test_bench_metrics_carry_tokens_and_cost(recorded_run):
    out = recorded_run["out"]
    records = ResultsLog(str(out / "results.jsonl")).read()
    statuses = {(r.task, r.turn): r.result.status for r in records}
    assert statuses == {("kb:L1/3_abs", 0): "rejected", ("kb:L1/3_abs", 1): "correct",
                        ("kb:L1/1_relu_max", 0): "format_error", ("kb:L1/1_relu_max", 1): "rejected"}
    # What the server reported for each request, recomputed from the requests it received.
    usage = [usage_of(body, view_script(body)) for body in recorded_run["requests"]]
    prompt = sum(u["prompt_tokens"] for u in usage)
    completion = sum(u["completion_tokens"] for u in usage)
    reasoning = sum(u["completion_tokens_details"]["reasoning_tokens"] for u in usage)
    assert len(usage) == 4 and prompt > 0 and reasoning > 0
    assert sum(r.prompt_tokens for r in records) == prompt
    assert sum(r.completion_tokens for r in records) == completion
    tokens = json.loads((out / "metrics.json").read_text())["tokens"]
    assert (tokens["prompt_tokens"], tokens["completion_tokens"], tokens["reasoning_tokens"]) == (
        prompt, completion, reasoning)
    assert tokens["correct_kernels"] == 1 and tokens["fast_kernels"] in (0, 1)
    assert tokens["tokens_per_kernel"] == pytest.approx((prompt + completion) / 4)
    assert tokens["tokens_per_correct_kernel"] == pytest.approx(prompt + completion)   # one correct kernel
    cost = (prompt * PRICE_IN + completion * PRICE_OUT) / 1e6
    assert tokens["cost_usd"] == pytest.approx(cost)
    assert tokens["cost_per_correct_kernel_usd"] == pytest.approx(cost)
    assert tokens["cost_per_kernel_usd"] == pytest.approx(cost / 4)
    report = (out / "report.md").read_text()
    assert "## Tokens and cost" in report and f"${cost:.4f}" in report


def test_view_writes_one_self_contained_page(recorded_run, tmp_path, capsys):
    page_path = tmp_path / "page.html"
    assert main(["view", str(recorded_run["out"]), "--out", str(page_path)]) == 0
    assert str(page_path) in capsys.readouterr().out
    page = page_path.read_text(encoding="utf-8")
    assert not re.search(r"https?://", page, re.IGNORECASE)          # no external URL, not even the quoted one
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!data:|#)""", page)  # nothing loaded from elsewhere
    assert not re.search(r"<link\b|@import|url\(", page)
    plots = [p for p in recorded_run["out"].glob("*.png") if p.name != "view.png"]
    assert len(plots) >= 3 and page.count("data:image/png;base64,") == len(plots)  # every bench plot, embedded
    # The embedded JSON gives back every character, the URL in the rejected kernel's comment included.
    blocks = re.findall(r'<script type="application/json" class="task-data">(.*?)</script>', page, re.DOTALL)
    trajs = [json.loads(b) for b in blocks]
    codes = [t["c"] for task in trajs for traj in task for t in traj["turns"]]
    assert any("https://example.com/abs-notes" in c for c in codes)


def test_inline_reasoning_tokens_count_the_think_blocks():
    from agent.policy import inline_reasoning_tokens

    words = lambda text: len(text.split())  # noqa: E731 - a stand-in tokenizer: one token a word
    assert inline_reasoning_tokens("<think>one two three</think> answer here", words) == 3
    assert inline_reasoning_tokens("no reasoning at all", words) == 0
    assert inline_reasoning_tokens("<think>cut off mid thought", words) == 4   # never closed: all of it


def test_embedded_json_cannot_close_its_script_element():
    hostile = {"c": "</script><script>alert(1)</script><!-- & \u2028 http://x"}
    text = embed_json(hostile)
    assert "<" not in text and ">" not in text and "://" not in text
    assert json.loads(text) == hostile


def _traj(task_id: str, traj_id: str, statuses: list[str], inherited: int = 0, parent: str = "") -> dict:
    turns = [Turn(index=i, prompt=[], response=f"<think>plan {i}</think><summary>s{i}</summary>", reasoning="",
                  summary=f"s{i}", candidate=f"code line {i}\nshared\n", score=0.0,
                  result=EvalResult(status=s, correct=s == "correct", speedup=1.5 if s == "correct" else 0.0,
                                    flags=("static:try_except",) if s == "rejected" else ()),
                  prompt_tokens=100, completion_tokens=40, reasoning_tokens=10)
             for i, s in enumerate(statuses)]
    return Trajectory(task_id=task_id, traj_id=traj_id, turns=tuple(turns), inherited_turns=inherited,
                      parent=parent).to_dict()


def test_view_reads_optimize_and_train_runs(tmp_path):
    opt = tmp_path / "opt"
    opt.mkdir()
    lines = [_traj("user/my_model", "0", ["rejected", "correct"]),
             _traj("user/my_model", "r1/0", ["rejected", "correct", "incorrect"], inherited=2, parent="0")]
    (opt / "trajectories.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines) + '{"torn')
    run = load_run(str(opt))
    assert run["kind"] == "optimize" and [t["id"] for t in run["tasks"]] == ["user/my_model"]
    task = run["tasks"][0]
    assert task["best"] == 1.5 and task["ok"] == 2 and task["origin"] == "user"
    beam = next(t for t in task["trajs"] if t["id"] == "r1/0")
    assert [t.get("inh", 0) for t in beam["turns"]] == [1, 1, 0] and beam["parent"] == "0"
    assert beam["turns"][0]["r"] == "plan 0"                        # inline <think> shown as the reasoning
    assert beam["turns"][0]["f"] == ["static:try_except"] and beam["turns"][0]["tk"] == [100, 40, 10]
    train = tmp_path / "train"
    (train / "trajectories").mkdir(parents=True)
    (train / "trajectories" / "step_000003.jsonl").write_text(json.dumps(_traj("kb:L2/7_conv", "1", ["correct"])) + "\n")
    run = load_run(str(train))
    assert run["kind"] == "train" and run["tasks"][0]["level"] == 2
    assert run["tasks"][0]["trajs"][0]["id"] == "step 3 / 1"


def test_view_of_a_folder_without_a_run_is_a_usage_error(tmp_path, capsys):
    assert main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "results.jsonl" in err


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _browser(browser: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                               "--no-first-run", "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=180)


def test_page_in_headless_chromium(recorded_run):
    """What a person sees once the page's script ran: the task table, a diff, a rejected kernel's flags;
    and a screenshot of it in the run folder (view.png)."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium here and scripts/install.sh could not install Debian's chromium "
                    "(apt-get missing or not root)")
    out = recorded_run["out"]
    assert main(["view", str(out)]) == 0
    url = (out / "view.html").resolve().as_uri()
    closed = _browser(browser, "--dump-dom", url).stdout
    assert 'data-ready="1"' in closed, closed[-2000:]
    assert re.findall(r'<tr class="task" data-task="([^"]+)"', closed) == ["kb:L1/1_relu_max", "kb:L1/3_abs"]
    assert "1/1" in closed and "0/1" in closed and 'class="turn' not in closed   # trajectories built on demand
    opened = _browser(browser, "--dump-dom", url + "#open=all").stdout
    turns = re.findall(r'<div class="turn" data-status="(\w+)"', opened)
    assert sorted(turns) == ["correct", "format_error", "rejected", "rejected"]
    flags = re.search(r'<div class="flags rejected" data-role="flags">(.*?)</div>', opened, re.DOTALL)
    assert flags and "static:try_except" in flags.group(1)
    diff = re.search(r'<div data-role="diff">(.*?)</div>', opened, re.DOTALL)
    assert diff, "the correct abs kernel is shown as a diff against the rejected one"
    assert re.search(r'<span class="del">- +try:</span>', diff.group(1))
    assert re.search(r'<span class="add">\+ +return ext.abs_fwd', diff.group(1))
    assert "Turn 1: the reference is elementwise" in opened               # reasoning, folded in <details>
    assert "https://example.com/abs-notes" in opened                        # shown as text
    shot = out / "view.png"
    _browser(browser, f"--screenshot={shot}", "--window-size=1280,1000", url + "#task=kb:L1/3_abs")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_choosing_no_tracker_imports_none(tmp_path):
    """Without --report-to, a bench run's code path never imports wandb or trackio; choosing one that is
    not installed is a one-line usage error before any work."""
    code = ("import sys; from cli.main import main; from evals import runner, tracking, metrics, report; "
            "import cli.bench_cmd, cli.train_cmd; "
            "print(sorted(m for m in ('wandb', 'trackio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    from evals.tracking import TrackerError, require_tracker

    for name in ("wandb", "trackio"):
        try:
            __import__(name)
            continue  # installed here: nothing to refuse
        except ImportError:
            pass
        with pytest.raises(TrackerError, match=f"pip install -e '.\\[{name}\\]'"):
            require_tracker(name)
        err = subprocess.run([sys.executable, "-m", "cli", "bench", "--report-to", name, "--out",
                              str(tmp_path / name)], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert err.returncode == 2 and f"the {name} package is not installed" in err.stderr
        assert not (tmp_path / name / "results.jsonl").exists()
        err = subprocess.run([sys.executable, "-m", "cli", "train", "--preset", "cpu-tiny", "--report-to", name,
                              "--out", str(tmp_path / f"train-{name}")], cwd=REPO, capture_output=True, text=True,
                             timeout=120)
        assert err.returncode == 2 and f"the {name} package is not installed" in err.stderr
        assert not (tmp_path / f"train-{name}").exists()


def test_optimize_report_says_what_the_session_cost_and_its_page_opens(tmp_path):
    from agent.openai_backend import OpenAIPolicy
    from agent.optimize import OptimizeConfig, optimize
    from agent.prompts import PromptSettings
    from tests.test_episode import RELU_TASK_SRC, SCRIPT, ScriptedEvaluator

    src = tmp_path / "my_relu.py"
    src.write_text(RELU_TASK_SRC)
    out = tmp_path / "out"
    with ChatServer(SCRIPT) as srv:
        outcome = optimize(OptimizeConfig(file=str(src), out=str(out), device="cpu", trajectories=1, turns=4,
                                          prompt=PromptSettings(hardware="test cpu"), price_in=PRICE_IN, price_out=PRICE_OUT),
                           policy=OpenAIPolicy(srv.base_url, "m", api_key=""), evaluator=ScriptedEvaluator())
    usage = [usage_of(body, SCRIPT[i]) for i, body in enumerate(srv.requests)]
    prompt, completion = sum(u["prompt_tokens"] for u in usage), sum(u["completion_tokens"] for u in usage)
    turns = outcome.trajectories[0].turns
    assert [t.prompt_tokens for t in turns] == [u["prompt_tokens"] for u in usage]
    assert turns[1].reasoning_tokens == usage[1]["completion_tokens_details"]["reasoning_tokens"] > 0
    report = (out / "report.md").read_text()
    cost = (prompt * PRICE_IN + completion * PRICE_OUT) / 1e6
    assert f"{prompt:,} prompt, {completion:,} completion" in report and f"session cost ${cost:.4f}" in report
    run = load_run(str(out))
    assert run["kind"] == "optimize" and [t["s"] for t in run["tasks"][0]["trajs"][0]["turns"]] == [
        "format_error", "compile_error", "correct", "correct"]


def test_report_to_sends_the_curve_and_the_headline(tmp_path):
    """The tracker packages are not installed here (and their servers unreachable): stand-in modules with
    the same calls record what `report_metrics` sends."""
    from evals.metrics import compute_metrics

    fake = tmp_path / "fake"
    fake.mkdir()
    recorder = ('import json, os\nCALLS = []\n'
                'def _rec(*a, **k):\n    CALLS.append([a, k])\n'
                '    json.dump(CALLS, open(os.environ["TRACKER_LOG"], "w"), default=str)\n')
    (fake / "wandb.py").write_text(recorder + (
        "class _Run:\n    def __init__(self):\n        self.summary = self\n"
        "    def log(self, d, step=None): _rec('log', d, step=step)\n"
        "    def update(self, d): _rec('summary', d)\n"
        "    def finish(self): _rec('finish')\n"
        "def init(**k):\n    _rec('init', **k)\n    return _Run()\n"))
    (fake / "trackio.py").write_text(recorder + (
        "def init(**k): _rec('init', **k)\ndef log(d, step=None): _rec('log', d, step=step)\n"
        "def finish(): _rec('finish')\n"))
    records = [bench_record("A", "0", t, EvalResult(status="correct" if t else "incorrect", correct=bool(t), speedup=1.5),
                            prompt_tokens=10, completion_tokens=5) for t in range(2)]
    metrics_path = tmp_path / "metrics.json"
    metrics_path.write_text(json.dumps(compute_metrics(records, 2)))
    for name in ("wandb", "trackio"):
        log = tmp_path / f"{name}.json"
        code = ("import json, sys; from evals.tracking import report_metrics; "
                f"report_metrics({name!r}, json.load(open({str(metrics_path)!r})), {{'model': 'm'}}, {str(tmp_path)!r})")
        env = dict(os.environ, PYTHONPATH=f"{fake}{os.pathsep}{REPO}", TRACKER_LOG=str(log))
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        calls = json.loads(log.read_text())
        assert calls[0][0][0] == "init" and calls[0][1]["project"] == "kernel-agent"
        logs = [c for c in calls if c[0][0] == "log"]
        assert [c[1]["step"] for c in logs] == [1, 2, 2]                    # one step per turn, then the headline
        assert logs[1][0][1]["bench/per_turn/correct_best@k"] == 1.0
        final = logs[2][0][1]
        assert final["bench/overall/correct_best@k"] == 1.0 and final["bench/tokens/tokens_per_correct_kernel"] == 30.0
        assert calls[-1][0][0] == "finish"


def _pipeline_folder(root: Path) -> Path:
    """A pipeline folder as `train --pipeline` leaves it: summary.json, the report and its plots (written by the
    real report code), RL's metrics and two-turn trajectories under rl/."""
    from jobs.pipeline_report import write_pipeline_report
    from jobs.probes import family_codes
    from jobs.trajectory_stats import per_step

    codes = family_codes(True)
    out, rl = root / "cpu-tiny", root / "cpu-tiny" / "rl"
    (rl / "trajectories").mkdir(parents=True)
    metrics = [{"step": i, "reward/mean_score": 0.8 + 0.1 * i, "reward/turn1_mean_score": 0.7 + 0.1 * i,
                "reward/turn2_mean_score": 0.9 + 0.1 * i, "rollout/turn1_advantage_mean": 0.2,
                "rollout/turn2_advantage_mean": -0.2, "reward/correct_share": 1.0} for i in range(3)]
    (rl / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    for step in range(3):
        turns = [Turn(index=i, prompt=[], response="", reasoning="", summary=summary, candidate=codes[name],
                      score=0.3 + speedup, result=EvalResult(status="correct", correct=True, speedup=speedup,
                                                             feedback=f"status: correct\nspeedup {speedup}x"))
                 for i, (name, summary, speedup) in enumerate((("rows", "Row-major walk", 0.12),
                                                               ("columns", "Attempt 1 ran at 0.12x. Column-major walk.", 1.6)))]
        traj = Trajectory(task_id="affine/01", traj_id="0", turns=tuple(turns)).to_dict()
        (rl / "trajectories" / f"step_{step:06d}.jsonl").write_text(json.dumps(traj) + "\n")
    probe = lambda fast, refine: {"tasks": {"affine/24": {"rows": fast, "crossed": 4 - fast, "columns": 0, "other": 0}},
                                  "samples": 4, "fast_share": fast / 4, "refine_share": refine}
    summary = {"preset": "cpu-tiny", "walls": {"total_s": 60.0}, "wall_s": 60.0, "probe_before": probe(1, 0.5),
               "probe_after": probe(4, 0.9), "bench": {"source": "skipped", "error": "none"}, "rl_out": str(rl),
               "steps": per_step(str(rl), codes)}
    (out / "summary.json").write_text(json.dumps(summary))
    write_pipeline_report(str(out), summary)
    return out


def test_view_of_a_pipeline_folder_shows_its_curves_and_multi_turn_trajectories(tmp_path):
    out = _pipeline_folder(tmp_path)
    run = load_run(str(out))
    assert run["kind"] == "pipeline" and [t["id"] for t in run["tasks"]] == ["affine/01"]
    assert {"reward.png", "turns.png"} <= {p["name"] for p in run["plots"]}
    assert ["fast_share", "0.25 → 1.00"] in run["headline"] and ["refine_share", "0.50 → 0.90"] in run["headline"]
    assert all(len(t["turns"]) == 2 for t in run["tasks"][0]["trajs"])
    report = (out / "report.md").read_text()
    assert "Attempt 1 ran at 0.12x. Column-major walk." in report and " turn 2 > turn 1 |" in report
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium here and scripts/install.sh could not install Debian's chromium "
                    "(apt-get missing or not root)")
    page = tmp_path / "page.html"
    assert main(["view", str(out), "--out", str(page)]) == 0
    opened = _browser(browser, "--dump-dom", page.resolve().as_uri() + "#open=all").stdout
    assert 'data-ready="1"' in opened, opened[-2000:]
    assert len(re.findall(r'alt="(reward|turns)\.png"', opened)) == 2          # the curves
    assert len(re.findall(r'<div class="turn" data-status="correct"', opened)) == 6  # 3 steps x 2 turns
    assert "refine_share" in opened and "0.50 → 0.90" in opened
