"""Multi-turn episodes: statuses, context rules, batching, overlap, JSONL resume, beam search.

Unit tests use an in-test evaluator (instant, scripted verdicts). The `slow` test runs the real
harness on small C++ ReLU candidates written here (a compile error, a slow one, a fast one).
"""

from __future__ import annotations

import json
from dataclasses import replace
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from agent.episode import EpisodeRunner
from agent.openai_backend import OpenAIPolicy
from agent.policy import Completion, SamplingConfig
from agent.prompts import PromptSettings
from agent.strategies import beam, parallel, select_beam
from agent.trajectory import Trajectory, TrajectoryLog
from kernelbench.harness.result import EvalResult
from kernelbench.tasks.task import Task
from rewards import ScoreConfig
from tests.chat_server import ChatServer

from kernelbench.executors.evaluator import Evaluator  # noqa: E402,F401  (our own module: imported, never probed)
RELU_TASK_SRC = '''\
"""ReLU on a small matrix (test task)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


rows = 256
cols = 1024


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

_CANDIDATE = '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

torch::Tensor relu_run(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat, "contiguous float32 expected");
    torch::Tensor y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = x.numel();
BODY
    return y;
}
"""

ext = load_inline(name="NAME", cpp_sources=source, functions=["relu_run"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_run(x)
'''

FAST_BODY = "    for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];"
# Slow but correct: a needless copy pass, then the same idempotent ReLU pass repeated over the output
# (the compiler cannot prove the repeats redundant, so each one costs a full sweep).
SLOW_BODY = """    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
    for (int pass = 0; pass < 24; ++pass)
        for (int64_t i = 0; i < n; ++i) out[i] = out[i] < 0.0f ? 0.0f : out[i];"""
# A missing semicolon: the C++ compiler rejects it.
BROKEN_BODY = "    for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i]\n    int oops = 0"

FAST_SRC = _CANDIDATE.replace("BODY", FAST_BODY).replace("NAME", "test_relu_fast")
SLOW_SRC = _CANDIDATE.replace("BODY", SLOW_BODY).replace("NAME", "test_relu_slow")
BROKEN_SRC = _CANDIDATE.replace("BODY", BROKEN_BODY).replace("NAME", "test_relu_broken")

RELU_TASK = Task(id="test/relu", level=1, name="relu", origin="test", source=RELU_TASK_SRC)


def answer(summary: str, code: str, think: str = "") -> str:
    thought = f"<think>{think}</think>\n" if think else ""
    return f"{thought}<summary>{summary}</summary>\n\n```python\n{code}\n```\n"


# The four scripted answers of the done-criteria episode, in turn order.
SCRIPT = [
    {"content": "<think>SECRET-THOUGHT-1 the plan</think>I would write a kernel but I forgot the code."},
    {"content": answer("SUMMARY-2 a first C++ loop", BROKEN_SRC), "reasoning_content": "SECRET-THOUGHT-2 api field"},
    {"content": answer("SUMMARY-3 fixed the missing semicolon", SLOW_SRC, think="SECRET-THOUGHT-3 inline")},
    {"content": answer("SUMMARY-4 dropped the needless passes", FAST_SRC), "reasoning": "SECRET-THOUGHT-4"},
]
EXPECTED = ["format_error", "compile_error", "correct", "correct"]


class ScriptedEvaluator:
    """Verdicts chosen by which candidate was submitted; evaluations run on a thread like the real one."""

    def __init__(self, delay_s: float = 0.0, raise_on: str = ""):
        self.pool = ThreadPoolExecutor(max_workers=4)
        self.delay_s = delay_s
        self.raise_on = raise_on
        self.submitted: list[tuple[str, str, float]] = []
        self.groups: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def verdict(self, src: str) -> EvalResult:
        if self.raise_on and self.raise_on in src:
            raise RuntimeError("reference failed")
        if src.strip() == BROKEN_SRC.strip() or "BROKEN" in src:
            return EvalResult(status="compile_error", feedback="error: expected ';' before 'int' (line 12)")
        speed = 0.2 if (src.strip() == SLOW_SRC.strip() or "SLOW" in src) else 1.7
        return EvalResult(status="correct", compiled=True, correct=True, speedup=speed,
                          runtime_ms=1.0 / speed, ref_runtime_ms=1.0, feedback=f"correct; speedup {speed}x")

    def submit(self, task: Task, src: str, group="") -> Future:
        with self.lock:
            self.submitted.append((task.id, src, time.perf_counter()))
            self.groups.append((task.id, group))

        def work():
            time.sleep(self.delay_s)
            return self.verdict(src)

        return self.pool.submit(work)


def runner_for(policy, evaluator, tmp_path, turns=4, **kw) -> EpisodeRunner:
    return EpisodeRunner(policy, evaluator, turns=turns, sampling=SamplingConfig(max_tokens=512),
                         prompt_settings=PromptSettings(device="cpu", hardware="test cpu"),
                         log_path=str(tmp_path / "trajectories.jsonl"), **{"score": ScoreConfig().score, **kw})


def check_scripted_episode(traj: Trajectory, srv: ChatServer) -> None:
    """The done criteria: statuses, feedback carried forward, summaries kept, reasoning never re-sent."""
    assert [t.result.status for t in traj.turns] == EXPECTED
    prompts = [json.dumps(r["messages"]) for r in srv.requests]
    assert len(prompts) == 4
    for k in range(3):
        user = traj.turns[k + 1].prompt[-1]["content"]
        assert traj.turns[k].result.feedback.strip() in user, f"turn {k} feedback missing from turn {k + 1}"
    assert "no code found" in traj.turns[1].prompt[-1]["content"]
    assert [t.summary.split()[0] for t in traj.turns[1:]] == ["SUMMARY-2", "SUMMARY-3", "SUMMARY-4"]
    assert "SUMMARY-2" in prompts[2] and "SUMMARY-3" in prompts[3] and BROKEN_SRC.splitlines()[-1] in prompts[2]
    assert not any("SECRET-THOUGHT" in p for p in prompts)
    assert traj.turns[1].reasoning.startswith("SECRET-THOUGHT-2") and traj.turns[3].reasoning == "SECRET-THOUGHT-4"
    assert "SECRET-THOUGHT-3" in traj.turns[2].response  # the record keeps what was generated
    assert traj.turns[3].result.speedup > traj.turns[2].result.speedup
    assert traj.turns[0].candidate == "" and traj.turns[3].candidate.strip() == FAST_SRC.strip()


def test_scripted_episode_with_in_test_evaluator(tmp_path):
    with ChatServer(SCRIPT) as srv:
        runner = runner_for(OpenAIPolicy(srv.base_url, "m", api_key=""), ScriptedEvaluator(), tmp_path)
        [traj] = parallel(runner, [RELU_TASK], trajectories=1)
    check_scripted_episode(traj, srv)
    [logged] = TrajectoryLog(str(tmp_path / "trajectories.jsonl")).load().values()
    assert logged == traj  # JSON round trip is lossless


@pytest.mark.slow
def test_scripted_episode_with_real_harness(tmp_path, build_cache_dir):
    from kernelbench.harness.config import EvalConfig
    from kernelbench.executors.evaluator import Evaluator

    with ChatServer(SCRIPT) as srv, Evaluator(EvalConfig(device="cpu", size="cpu", build_cache_dir=build_cache_dir,
                                                          timing_trials=30)) as evaluator:
        runner = runner_for(OpenAIPolicy(srv.base_url, "m", api_key=""), evaluator, tmp_path)
        [traj] = parallel(runner, [RELU_TASK], trajectories=1)
    check_scripted_episode(traj, srv)
    assert "expected" in traj.turns[1].result.feedback or "error" in traj.turns[1].result.feedback


class CountingPolicy:
    """Answers every prompt with a candidate naming its task and call number; records each call."""

    def __init__(self, kinds=("FAST",)):
        self.calls: list[tuple[int, float]] = []
        self.kinds = kinds

    def generate(self, prompts, sampling):
        self.calls.append((len(prompts), time.perf_counter()))
        out = []
        for i, p in enumerate(prompts):
            kind = self.kinds[i % len(self.kinds)]
            code = f"class ModelNew:\n    kind = '{kind}'\n    call = {len(self.calls)}"
            out.append(Completion(text=answer(f"{kind} try", code), token_ids=(1, 2), logprobs=(-0.1, -0.2)))
        return out


def test_lockstep_makes_one_policy_call_per_task_turn_and_generation_overlaps_evaluation(tmp_path):
    tasks = [Task(id=f"test/t{i}", level=1, name=f"t{i}", origin="test", source=RELU_TASK_SRC) for i in range(2)]
    policy, evaluator = CountingPolicy(), ScriptedEvaluator(delay_s=0.3)
    trajs = parallel(runner_for(policy, evaluator, tmp_path, turns=2, streaming=False), tasks, trajectories=3)
    assert [n for n, _ in policy.calls] == [3, 3, 3, 3]  # 2 tasks x 2 turns, each call holds all 3 trajectories
    # The second task's first turn was generated before the first task's evaluations (0.3 s) finished.
    first_submit = min(t for tid, _, t in evaluator.submitted if tid == "test/t0")
    assert policy.calls[1][1] - first_submit < 0.25
    assert sorted((t.task_id, t.traj_id) for t in trajs) == sorted((k.id, str(i)) for k in tasks for i in range(3))
    assert all(len(t.turns) == 2 and t.turns[1].token_ids == (1, 2) for t in trajs)


def test_one_evaluation_group_per_task_and_turn(tmp_path):
    """The answers of one task at one turn go to the evaluator as one group (one reference for them all); another
    task, another turn or another run never shares it."""
    tasks = [Task(id=f"test/t{i}", level=1, name=f"t{i}", origin="test", source=RELU_TASK_SRC) for i in range(2)]
    evaluator = ScriptedEvaluator()
    parallel(runner_for(CountingPolicy(), evaluator, tmp_path, turns=2), tasks, trajectories=3)
    parallel(runner_for(CountingPolicy(), evaluator, tmp_path / "again", turns=2), tasks, trajectories=3)
    runs = [evaluator.groups[:12], evaluator.groups[12:]]
    for run in runs:
        assert all(g for _, g in run)
        by_group: dict[str, set] = {}
        for task_id, g in run:
            by_group.setdefault(g, set()).add(task_id)
        assert len(by_group) == 4 and all(len(t) == 1 for t in by_group.values())  # 2 tasks x 2 turns
        assert all(sum(1 for _, g in run if g == name) == 3 for name in by_group)  # 3 trajectories each
    assert not {g for _, g in runs[0]} & {g for _, g in runs[1]}


def test_rerun_resumes_and_skips_finished_trajectories(tmp_path):
    trajs = parallel(runner_for(CountingPolicy(), ScriptedEvaluator(), tmp_path, turns=2), [RELU_TASK], 3)
    log_path = tmp_path / "trajectories.jsonl"
    lines = {json.loads(line)["traj_id"]: line for line in log_path.read_text().splitlines()}
    assert sorted(lines) == ["0", "1", "2"]  # logged as each finished
    # Simulate a crash that lost one trajectory and tore the line of another.
    log_path.write_text(lines["0"] + "\n" + lines["1"][: len(lines["1"]) // 2])
    policy = CountingPolicy()
    again = parallel(runner_for(policy, ScriptedEvaluator(), tmp_path, turns=2), [RELU_TASK], 3)
    # only the two unfinished trajectories were generated (their second turns together or one by one)
    assert policy.calls[0][0] == 2 and sum(n for n, _ in policy.calls) == 4
    assert again[0] == trajs[0] and [t.traj_id for t in again] == ["0", "1", "2"]
    done = CountingPolicy()
    parallel(runner_for(done, ScriptedEvaluator(), tmp_path, turns=2), [RELU_TASK], 3)
    assert done.calls == []


def test_evaluator_failure_is_recorded_not_raised(tmp_path):
    evaluator = ScriptedEvaluator(raise_on="FAST")
    [traj] = parallel(runner_for(CountingPolicy(), evaluator, tmp_path, turns=1), [RELU_TASK], 1)
    assert traj.turns[0].result.status == "harness_error" and traj.turns[0].result.flags == ()


def test_harness_error_in_the_middle_of_a_trajectory_is_left_out_of_its_best_score(tmp_path):
    """The real EpisodeRunner with the run's scoring: the middle turn's evaluation fails in the harness, so its
    score is None (no verdict on the kernel); the trajectory's best score, beam selection and the log read
    back skip it instead of raising."""
    evaluator = ScriptedEvaluator(raise_on="call = 2")  # the second policy call: turn index 1 of 3
    [traj] = parallel(runner_for(CountingPolicy(), evaluator, tmp_path, turns=3), [RELU_TASK], 1)
    assert [t.result.status for t in traj.turns] == ["correct", "harness_error", "correct"]
    assert [t.score is None for t in traj.turns] == [False, True, False]
    assert traj.best_score == pytest.approx(0.3 + 1.7)
    assert select_beam([traj, traj], 1) == [traj]
    [again] = [Trajectory.from_dict(json.loads(line)) for line in open(tmp_path / "trajectories.jsonl")]
    assert again.turns[1].score is None and again.best_score == traj.best_score


def test_beam_keeps_the_best_and_replicates_them(tmp_path):
    # Slots alternate slow / fast / broken answers in round 0, so the fast slots (1, 4) score best. Lockstep
    # turns: each call then holds the six trajectories in slot order (streamed, a second turn's position in its
    # call, and so its kind, depends on which evaluations came back first).
    policy = CountingPolicy(kinds=("SLOW", "FAST", "BROKEN"))
    trajs = beam(runner_for(policy, ScriptedEvaluator(), tmp_path, turns=2, streaming=False), [RELU_TASK],
                 trajectories=6, rounds=2, keep=2)
    first, second = trajs[:6], trajs[6:]
    assert [t.traj_id for t in select_beam(first, 2)] == ["r0/1", "r0/4"]
    assert [t.parent for t in second] == ["r0/1", "r0/4"] * 3
    for t in second:
        assert t.inherited_turns == 2 and len(t.turns) == 4 and t.round == 1
        assert [x.index for x in t.turns] == [0, 1, 2, 3]
        # The continuation's first prompt shows the parent's two attempts.
        assert "Attempt 2" in t.turns[2].prompt[-1]["content"] and "Attempt 3" not in t.turns[2].prompt[-1]["content"]
    assert sum(n for n, _ in policy.calls) == 6 * 4 and policy.calls[0][0] == 6


def test_a_trajectory_log_skips_a_torn_write_and_refuses_a_foreign_record(tmp_path, caplog):
    from agent.trajectory import TrajectoryLog, read_trajectories

    log = TrajectoryLog(str(tmp_path / "t.jsonl"))
    good = Trajectory(task_id="L1/01", traj_id="0/0", turns=())
    log.append(good)
    with open(log.path, "a", encoding="utf-8") as f:
        f.write('{"task_id": "L1/01", "traj_')  # a crash mid-write
    log.append(replace(good, traj_id="0/1"))  # the next append starts a fresh line after the torn one
    assert [t.traj_id for t in read_trajectories(log.path)] == ["0/0", "0/1"]
    assert "t.jsonl:2: a torn write (not JSON), skipped" in caplog.text  # said, not dropped in silence
    with open(log.path, "a", encoding="utf-8") as f:
        f.write('{"step": 3, "loss": 0.5}\n')  # JSON, but not a trajectory: an error, never dropped in silence
    with pytest.raises(ValueError, match=r"t.jsonl:4: not a trajectory record"):
        log.load()
