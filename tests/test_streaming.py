"""Streamed turns (`agent.episode.EpisodeRunner`, `streaming=True`): a trajectory's next turn waits only for its
own verdict, and per-prompt seeds make the answers independent of how prompts were batched.

The evaluators here complete their futures when the test says so (held until released, or after a delay
chosen per candidate), and the policy reads each prompt's (trajectory, turn) back from its seed, so the
schedule is fixed by the test, not by the machine's speed.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from agent.episode import SEED_GROUPS, SEED_SLOTS, EpisodeRunner, Job
from agent.policy import Completion, SamplingConfig
from agent.prompts import PromptSettings
from agent.strategies import beam
from agent.trajectory import TrajectoryLog
from kernelbench.harness.result import EvalResult
from kernelbench.tasks.task import Task
from rewards import ScoreConfig
from tests.test_episode import RELU_TASK_SRC, answer

BASE_SEED = 7
TASKS = [Task(id=f"test/s{i}", level=1, name=f"s{i}", origin="test", source=RELU_TASK_SRC) for i in range(2)]


def key_of(seed: int) -> tuple[int, int, int]:
    """(task group, trajectory, turn) of a prompt, read back from its seed (`EpisodeRunner.prompt_seed`)."""
    rest, slot = divmod(seed - BASE_SEED, SEED_SLOTS)
    turn, group = divmod(rest, SEED_GROUPS)
    return group, slot, turn


class SeedPolicy:
    """Deterministic: each answer is a function of its prompt's seed alone. Kernels are `SLOW` for the keys in
    `slow`, no code at all (a format error) for the keys in `unparsed`, else `FAST`. Records every call's keys
    and runs `on_call(keys)` before answering."""

    def __init__(self, slow=(), unparsed=(), on_call=None):
        self.slow, self.unparsed, self.on_call = set(slow), set(unparsed), on_call
        self.calls: list[list[tuple[int, int, int]]] = []

    def generate(self, prompts, sampling: SamplingConfig):
        keys = [key_of(sampling.seed_of(i)) for i in range(len(prompts))]
        self.calls.append(keys)
        if self.on_call:
            self.on_call(keys)
        out = []
        for key in keys:
            if key in self.unparsed:
                text = f"no code this time {key}"
            else:
                kind = "SLOW" if key in self.slow else "FAST"
                text = answer(f"{kind} try", f"class ModelNew:\n    key = {key}\n    kind = '{kind}'")
            out.append(Completion(text=text, token_ids=(1, 2), logprobs=(-0.1, -0.2)))
        return out


def verdict(src: str) -> EvalResult:
    speed = 0.2 if "SLOW" in src else 1.7
    return EvalResult(status="correct", compiled=True, correct=True, speedup=speed, feedback=f"speedup {speed}x")


class HeldEvaluator:
    """`SLOW` kernels are held until `release()`; every other verdict is back at once."""

    def __init__(self):
        self.held: list[tuple[Future, str]] = []

    def submit(self, task, src, group=""):
        fut: Future = Future()
        if "SLOW" in src:
            self.held.append((fut, src))
        else:
            fut.set_result(verdict(src))
        return fut

    def pending(self) -> bool:
        return any(not f.done() for f, _ in self.held)

    def release(self) -> None:
        for fut, src in self.held:
            if not fut.done():
                fut.set_result(verdict(src))


class DelayedEvaluator:
    """Verdicts from worker threads: `SLOW` kernels take `slow_s`, others return at once, so a streamed run
    batches its prompts differently from a lockstep one."""

    def __init__(self, slow_s: float = 0.15):
        self.pool = ThreadPoolExecutor(max_workers=8)
        self.slow_s = slow_s

    def submit(self, task, src, group=""):
        def work():
            threading.Event().wait(self.slow_s if "SLOW" in src else 0.0)
            return verdict(src)

        return self.pool.submit(work)


def runner(policy, evaluator, tmp_path=None, *, turns=2, streaming=True, name="t.jsonl", **kw) -> EpisodeRunner:
    return EpisodeRunner(policy, evaluator, turns=turns, sampling=SamplingConfig(max_tokens=64, seed=BASE_SEED),
                         prompt_settings=PromptSettings(device="cpu", hardware="test cpu"),
                         log_path=str(tmp_path / name) if tmp_path else "", streaming=streaming,
                         **{"score": ScoreConfig().score, **kw})


def jobs(tasks=TASKS[:1], n=2) -> list[Job]:
    return [Job(task=t, traj_id=str(i)) for t in tasks for i in range(n)]


def test_a_fast_trajectorys_next_turn_is_generated_while_a_slow_verdict_is_out():
    """Trajectory 0's first kernel is slow (held); trajectory 1's second turn is generated, evaluated and
    finished while that verdict is still out. In lockstep the same second turn waits for it."""
    evaluator = HeldEvaluator()
    seen = {}

    def on_call(keys):
        if (0, 1, 1) in keys:  # trajectory 1's second turn
            seen["slow verdict out"] = evaluator.pending()
            evaluator.release()

    policy = SeedPolicy(slow={(0, 0, 0)}, on_call=on_call)
    turns_seen = []
    trajs = runner(policy, evaluator, on_turn=lambda task, traj, turn: turns_seen.append((traj, turn.index))).run(jobs())
    assert seen == {"slow verdict out": True}
    assert policy.calls == [[(0, 0, 0), (0, 1, 0)], [(0, 1, 1)], [(0, 0, 1)]]
    assert turns_seen == [("1", 0), ("0", 0), ("1", 1), ("0", 1)]  # on_turn as each verdict lands
    assert [t.traj_id for t in trajs] == ["0", "1"] and [len(t.turns) for t in trajs] == [2, 2]
    assert trajs[0].turns[0].result.speedup == 0.2 and trajs[0].turns[1].result.speedup == 1.7

    lockstep_evaluator = HeldEvaluator()
    lockstep_seen = {}

    def lockstep_call(keys):
        if (0, 1, 1) in keys:
            lockstep_seen["slow verdict out"] = lockstep_evaluator.pending()

    timer = threading.Timer(0.2, lockstep_evaluator.release)
    timer.start()
    lockstep = SeedPolicy(slow={(0, 0, 0)}, on_call=lockstep_call)
    again = runner(lockstep, lockstep_evaluator, streaming=False).run(jobs())
    timer.join()
    assert lockstep_seen == {"slow verdict out": False}
    assert lockstep.calls == [[(0, 0, 0), (0, 1, 0)], [(0, 0, 1), (0, 1, 1)]]
    assert again == trajs  # the same answers and verdicts, only generated in another order


def test_streamed_and_lockstep_runs_give_the_same_trajectories(tmp_path):
    """Two tasks x 3 trajectories x 3 turns with slow kernels and format errors scattered over them: the
    calls differ between the two schedules, the trajectories (answers, verdicts, scores, logs) do not."""
    slow = {(0, 0, 0), (0, 2, 1), (1, 1, 0), (1, 1, 1), (1, 0, 2)}
    unparsed = {(0, 1, 0), (1, 2, 1)}
    runs = {}
    for streaming in (True, False):
        policy = SeedPolicy(slow=slow, unparsed=unparsed)
        name = f"{streaming}.jsonl"
        trajs = runner(policy, DelayedEvaluator(), tmp_path, turns=3, streaming=streaming, name=name).run(
            jobs(TASKS, 3))
        runs[streaming] = (trajs, policy.calls, TrajectoryLog(str(tmp_path / name)).load())
    (streamed, streamed_calls, streamed_log), (lockstep, lockstep_calls, lockstep_log) = runs[True], runs[False]
    assert streamed == lockstep and streamed_log == lockstep_log
    assert len(lockstep_calls) == 2 * 3 and all(len({k[:2] for k in c}) == 3 for c in lockstep_calls)
    assert streamed_calls != lockstep_calls and sorted(k for c in streamed_calls for k in c) == sorted(
        k for c in lockstep_calls for k in c)
    # a format error is recorded as the call returns: that trajectory's next turn is in the very next call
    assert streamed_calls[0] == [(g, s, 0) for g in (0, 1) for s in range(3)] and (0, 1, 1) in streamed_calls[1]
    statuses = [t.result.status for traj in streamed for t in traj.turns]
    assert statuses.count("format_error") == 2 and statuses.count("correct") == 16


def test_a_crashed_streamed_run_resumes_to_the_uninterrupted_result(tmp_path):
    """Trajectory 1 finishes (and is logged) while trajectory 0 waits on a slow verdict; the run then dies
    generating trajectory 0's second turn. The rerun generates trajectory 0 alone, from its first turn with
    the seeds it had, and ends with what an uninterrupted run gives."""
    evaluator = HeldEvaluator()

    def crash(keys):
        if (0, 1, 1) in keys:
            evaluator.release()
        if (0, 0, 1) in keys:
            raise RuntimeError("the policy server went away")

    with pytest.raises(RuntimeError, match="went away"):
        runner(SeedPolicy(slow={(0, 0, 0)}, on_call=crash), evaluator, tmp_path).run(jobs())
    assert list(TrajectoryLog(str(tmp_path / "t.jsonl")).load()) == [("test/s0", "1")]

    resumed_policy = SeedPolicy(slow={(0, 0, 0)})
    resumed = runner(resumed_policy, DelayedEvaluator(0.0), tmp_path).run(jobs())
    assert resumed_policy.calls == [[(0, 0, 0)], [(0, 0, 1)]]
    whole = runner(SeedPolicy(slow={(0, 0, 0)}), DelayedEvaluator(0.0), tmp_path, name="whole.jsonl").run(jobs())
    assert resumed == whole


def test_seeds_are_distinct_per_task_trajectory_and_turn_and_repeat_with_the_run():
    """Every prompt of a run draws with a seed of its own, and a rerun whose verdicts come back at other times
    (so its calls hold other mixes of prompts) gives each (task, trajectory, turn) the same seed."""

    def seeds_of_a_run(slow_s: float) -> dict[tuple[str, str, int], int]:
        policy = SeedPolicy(slow={(0, 0, 0), (1, 2, 1)})
        trajs = runner(policy, DelayedEvaluator(slow_s), turns=3).run(jobs(TASKS, 3))
        by_turn = {}
        for group, slot, turn in (k for call in policy.calls for k in call):
            traj = trajs[3 * group + slot]
            # the answer drawn with this seed became that trajectory's turn
            assert f"key = {(group, slot, turn)}" in traj.turns[turn].response
            by_turn[(traj.task_id, traj.traj_id, turn)] = runner(policy, None).prompt_seed(group, slot, turn)
        assert len(by_turn) == sum(len(c) for c in policy.calls) == 2 * 3 * 3
        return by_turn

    first, second = seeds_of_a_run(0.02), seeds_of_a_run(0.2)
    assert len(set(first.values())) == 18 and first == second


def test_beam_rounds_stream_and_continue_with_seeds_of_their_own(tmp_path):
    """A second beam round continues its parents' turns; its prompts' seeds carry their turn index in the whole
    trajectory, so they differ from the first round's."""
    policy = SeedPolicy(slow={(0, 0, 0), (0, 0, 1), (0, 2, 0), (0, 2, 1)})
    trajs = beam(runner(policy, DelayedEvaluator(), tmp_path), TASKS[:1], trajectories=3, rounds=2, keep=1)
    second = trajs[3:]
    assert [t.parent for t in second] == ["r0/1"] * 3  # the one trajectory that drew no slow kernel
    assert all(t.inherited_turns == 2 and len(t.turns) == 4 for t in second)
    keys = [k for c in policy.calls for k in c]
    assert len(keys) == len(set(keys)) == 3 * 2 + 3 * 2
    assert sorted({k[2] for k in keys}) == [0, 1, 2, 3]


def test_a_broken_judge_stops_a_streamed_run():
    from kernelbench.executors.evaluator import HarnessBroken

    class Broken:
        def submit(self, task, src, group=""):
            fut: Future = Future()
            fut.set_exception(HarnessBroken("the reference solution is no longer judged correct"))
            return fut

    with pytest.raises(HarnessBroken):
        runner(SeedPolicy(), Broken()).run(jobs())


def test_streamed_calls_hold_at_most_one_chunk_of_a_chunked_backend():
    class Chunked(SeedPolicy):
        batch_size = 2

    policy = Chunked()
    runner(policy, HeldEvaluator(), turns=1).run(jobs(TASKS, 3))
    assert [len(c) for c in policy.calls] == [2, 2, 2]


def test_prompt_seed_layout_and_the_runs_bound():
    r = runner(SeedPolicy(), HeldEvaluator())
    assert r.prompt_seed(0, 0, 0) == BASE_SEED and key_of(r.prompt_seed(3, 17, 5)) == (3, 17, 5)
    with pytest.raises(ValueError, match="seeds would repeat"):
        r.run([Job(task=TASKS[0], traj_id=str(i)) for i in range(SEED_SLOTS + 1)])


def test_vllm_shares_a_request_only_among_identical_prompts_with_seeds_one_apart():
    """vLLM runs a request of n samples as n child requests seeded `seed + k`: identical prompts share one only
    while their own seeds run on by one, so each still draws with its own seed."""
    from agent.vllm_backend import _requests

    a, b = [{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]
    assert _requests([a, a, a, b], SamplingConfig(seed=5)) == [[0, 1, 2], [3]]
    assert _requests([a, a, b, a], SamplingConfig(seeds=(10, 11, 40, 12))) == [[0, 1, 3], [2]]
    assert _requests([a, a, a], SamplingConfig(seeds=(10, 30, 31))) == [[0], [1, 2]]


def test_the_lockstep_switch_reaches_the_runner_from_train_bench_and_optimize(tmp_path):
    """`streaming_turns: false` in a train preset, `--lockstep-turns` for bench and optimize; the training
    rollout then makes one call per task and turn."""
    from cli.bench_cmd import config_from
    from cli.main import build_parser
    from train.config import TrainConfig
    from train.presets import load_config
    from train.rollout import HarnessRollout

    preset = tmp_path / "p.yaml"
    preset.write_text("train:\n  streaming_turns: false\n")
    assert load_config(TrainConfig, str(preset), "train").streaming_turns is False
    assert TrainConfig().streaming_turns is True
    parser, _ = build_parser(["bench"])
    assert config_from(parser.parse_args(["bench", "--backend", "replay", "--from", "x"])).streaming_turns is True
    assert config_from(parser.parse_args(["bench", "--backend", "replay", "--from", "x",
                                          "--lockstep-turns"])).streaming_turns is False
    parser, _ = build_parser(["optimize"])
    assert parser.parse_args(["optimize", "m.py", "--lockstep-turns"]).lockstep_turns is True

    for streaming in (False, True):
        policy = SeedPolicy(slow={(0, 0, 0)})
        rollout = HarnessRollout(evaluator=DelayedEvaluator(), trajectories=2, turns=2,
                                 sampling=SamplingConfig(max_tokens=8), streaming=streaming, score=ScoreConfig().score,
                                 prompt_settings=PromptSettings(device="cpu", hardware="test"))
        rollout.collect(policy, TASKS, step=0, seed=BASE_SEED)
        if streaming:  # both tasks' first turns in one call
            assert policy.calls[0] == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]
        else:  # one call per task and turn, holding the task's two trajectories
            assert sorted(policy.calls) == [[(g, 0, t), (g, 1, t)] for g in (0, 1) for t in (0, 1)]
