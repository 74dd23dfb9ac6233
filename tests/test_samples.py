"""Trajectories -> per-turn samples: scores from the run's reward settings, returns, per-group advantages,
unknown (harness_error) turns, and the defects of the rollout around them."""

from __future__ import annotations

import re
from concurrent.futures import Future

import pytest

from agent.episode import EpisodeRunner
from agent.policy import Completion, SamplingConfig
from agent.prompts import PromptSettings
from agent.trajectory import Trajectory, Turn
from kernelbench.harness.result import CORRECT, FORMAT_ERROR, RUNTIME_ERROR, EvalResult
from kernelbench.tasks.task import Task
from rewards import ScoreConfig
from train.metrics_log import departing_share, first_word, usual_openings
from train.samples import build_samples


def _verdict(speedup: float | None) -> EvalResult:
    if speedup is None:
        return EvalResult(status=FORMAT_ERROR)
    return EvalResult(status=CORRECT, correct=True, compiled=True, speedup=speedup)


def _turn(i: int, speedup: float | None, ids=(5, 6), lps=(-0.1, -0.2), result: EvalResult | None = None) -> Turn:
    r = result or _verdict(speedup)
    return Turn(index=i, prompt=[{"role": "user", "content": "p"}], response="r", reasoning="", summary="",
                candidate="", result=r, score=ScoreConfig().score(r), token_ids=tuple(ids), logprobs=tuple(lps),
                prompt_token_ids=(1, 2))


def _encode(conv):
    return [ord(c) for c in conv[-1]["content"]]


def test_rewards_are_discounted_returns_of_scores_under_the_runs_weight():
    traj = Trajectory("A", "0", (_turn(0, None), _turn(1, 1.0), _turn(2, 0.3)))
    [samples] = build_samples([[traj]], _encode, scoring=ScoreConfig(correctness_weight=1.0), gamma=0.4)
    assert [s.score for s in samples] == pytest.approx([0.0, 2.0, 1.3])
    assert [s.reward for s in samples] == pytest.approx([0.4 * 2.0 + 0.16 * 1.3, 2.0 + 0.4 * 1.3, 1.3])
    [default] = build_samples([[traj]], _encode, scoring=ScoreConfig(), gamma=0.4)
    assert default[1].score == pytest.approx(1.3)  # Kevin's 0.3 only when the run says so


def test_a_harness_error_turn_is_unknown_not_zero():
    bad = EvalResult(status=RUNTIME_ERROR, flags=("harness_error",), feedback="the harness failed")
    new_status = EvalResult(status="harness_error")
    for failed in (bad, new_status):
        traj = Trajectory("A", "0", (_turn(0, 1.0), _turn(1, None, result=failed), _turn(2, 2.0)))
        [s] = build_samples([[traj, Trajectory("A", "1", (_turn(0, 0.5), _turn(1, 0.5), _turn(2, 0.5)))]], _encode,
                            scoring=ScoreConfig())
        assert s[1].reward is None and s[1].score is None and s[1].status == "harness_error" and s[1].advantage == 0.0
        assert s[0].reward == pytest.approx(1.3 + 0.16 * 2.3)  # the unknown term is dropped, not scored


def test_advantages_are_normalised_within_each_group_only():
    a = [Trajectory("A", "0/0", (_turn(0, 1.0),)), Trajectory("A", "0/1", (_turn(0, None),))]
    b = [Trajectory("B", "1/0", (_turn(0, 5.0),)), Trajectory("B", "1/1", (_turn(0, 5.0),))]
    ga, gb = build_samples([a, b], _encode, scoring=ScoreConfig())
    assert ga[0].advantage > 0 > ga[1].advantage and [s.group for s in ga + gb] == [0, 0, 1, 1]
    assert [s.advantage for s in gb] == [0.0, 0.0]


def test_inherited_turns_are_context_not_samples():
    traj = Trajectory("A", "r1/0", (_turn(0, 2.0), _turn(1, None)), inherited_turns=1)
    [samples] = build_samples([[traj]], _encode, scoring=ScoreConfig())
    assert [s.turn_index for s in samples] == [1] and samples[0].prompt_ids == (1, 2)


# ---------------------------------------------------------------- the episode runner's defects

class RecordingPolicy:
    """Answers every prompt with a fixed kernel and records each prompt's sampling seed."""

    def __init__(self):
        self.seeds: list[int] = []

    def generate(self, prompts, sampling: SamplingConfig):
        self.seeds.extend(sampling.seed_of(i) for i in range(len(prompts)))
        return [Completion(text=f"<summary>s</summary>\n```python\nclass ModelNew: pass  # {sampling.seed_of(i)}\n```",
                           token_ids=(3, 4), logprobs=(-0.1, -0.1)) for i in range(len(prompts))]


class InstantEvaluator:
    def __init__(self, speedup: float = 1.5):
        self.speedup = speedup
        self.submitted = 0

    def submit(self, task, src, group=""):
        self.submitted += 1
        f: Future = Future()
        f.set_result(EvalResult(status=CORRECT, correct=True, compiled=True, speedup=self.speedup))
        return f


TASK = Task(id="L1/x", level=1, name="x", origin="test", source="import torch\n")
TASK2 = Task(id="L1/y", level=1, name="y", origin="test", source="import torch\n")


def _runner(policy, evaluator, turns=2, **kw):
    return EpisodeRunner(policy, evaluator, turns=turns, sampling=SamplingConfig(max_tokens=8, seed=5),
                         prompt_settings=PromptSettings(device="cpu", hardware="test"),
                         **{"score": ScoreConfig().score, **kw})


def test_every_prompt_of_a_run_gets_its_own_seed():
    from agent.episode import Job

    policy = RecordingPolicy()
    _runner(policy, InstantEvaluator(), turns=3).run([Job(task=t, traj_id=str(i)) for t in (TASK, TASK2)
                                                      for i in range(2)])
    assert len(policy.seeds) == 12 and len(set(policy.seeds)) == 12


def test_turn_scores_follow_the_runs_correctness_weight():
    from agent.episode import Job

    [traj] = _runner(RecordingPolicy(), InstantEvaluator(1.5), turns=1,
                     score=ScoreConfig(correctness_weight=1.0).score).run([Job(task=TASK, traj_id="0")])
    assert traj.turns[0].score == pytest.approx(2.5)


def test_a_task_drawn_twice_in_one_batch_gives_two_full_groups():
    from train.rollout import HarnessRollout

    ev = InstantEvaluator()
    rollout = HarnessRollout(evaluator=ev, trajectories=3, turns=2, sampling=SamplingConfig(max_tokens=8),
                             prompt_settings=PromptSettings(device="cpu", hardware="test"), score=ScoreConfig().score)
    trajs = rollout.collect(RecordingPolicy(), [TASK, TASK2, TASK], step=0, seed=1)
    assert len(trajs) == 9 and len({(t.task_id, t.traj_id) for t in trajs}) == 9
    assert [t.task_id for t in trajs] == ["L1/x"] * 3 + ["L1/y"] * 3 + ["L1/x"] * 3
    assert all(len(t.turns) == 2 for t in trajs) and ev.submitted == 18


def test_duplicate_jobs_are_refused():
    from agent.episode import Job

    with pytest.raises(ValueError, match="share task"):
        _runner(RecordingPolicy(), InstantEvaluator()).run([Job(task=TASK, traj_id="0")] * 2)


def test_collapse_monitor_reads_the_answer_after_the_chain_of_thought():
    texts = ["<think>\nLet me see.</think>\n<summary>fast</summary>", "<think>hmm</think><summary>x</summary>",
             "<think>ok</think>\nSure, here", "<think>never closed"]
    assert [first_word(t) for t in texts] == ["<summary>fast</summary>", "<summary>x</summary>", "Sure,", ""]
    openings = usual_openings(texts[:2] * 5)
    assert departing_share(texts[:3], openings) > 0.3


def test_prompt_ids_without_the_backends_match_what_the_hf_backend_encodes(tmp_path):
    from agent.hf_backend import HFPolicy
    from grpo_synthetic import build_tiny_dir
    from train.generation import chat_ids

    policy = HFPolicy.from_pretrained(build_tiny_dir(str(tmp_path / "m")))
    conv = [{"role": "user", "content": "write a kernel"}]
    [c] = policy.generate([conv], SamplingConfig(max_tokens=3))
    assert chat_ids(policy.tokenizer, conv) == list(c.prompt_token_ids)


def test_slow_copies_weight_the_warm_start_and_its_loss_floor():
    import math

    from train.config import SFTConfig
    from train.sft import loss_floor, solution_examples

    cfg = SFTConfig(tasks=("L1/03_silu",), solution_kinds=("cpu", "cpu_slow"), slow_copies=2, prompt_style="compact",
                    compact_solutions=True)
    examples = solution_examples(cfg)
    assert [e.source for e in examples] == ["cpu", "cpu_slow", "cpu_slow"]
    floor = loss_floor(examples, [10, 10, 10])
    assert floor == pytest.approx((math.log(3) + 2 * math.log(1.5)) / 30)
    assert loss_floor(examples[:2], [10, 10]) == pytest.approx(math.log(2) / 10)


def test_pipeline_report_states_plainly_whether_it_learned(tmp_path):
    import json as _json

    from jobs.pipeline_report import write_pipeline_report

    rl = tmp_path / "rl"
    rl.mkdir()
    rows = [{"step": i, "reward/mean_score": 0.5 + 0.1 * i, "reward/correct_share": 1.0, "loss/grad_norm": 0.1,
             "trl/step_time": 3.0, "trl/clip_ratio/region_mean": 0.0} for i in range(3)]
    (rl / "metrics.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in rows))
    probe = lambda fast, refine: {"tasks": {"affine/24": {"rows": fast, "crossed": 16 - fast, "columns": 0, "other": 0}},
                                  "samples": 16, "fast_share": fast / 16, "refine_share": refine}
    summary = {"preset": "cpu-tiny", "walls": {"total_s": 60.0}, "wall_s": 60.0, "probe_before": probe(3, 0.5),
               "probe_after": probe(12, 0.875), "bench": {"source": "failed", "error": "x"}, "rl_out": str(rl)}
    text = open(write_pipeline_report(str(tmp_path), summary)).read()
    assert text.splitlines()[2].startswith("**First answers: learned.**") and "0.19 before RL to 0.75 after" in text
    assert "**Refinement: learned.**" in text and "from 0.50 before RL to 0.88 after" in text
    summary["probe_after"] = probe(8, 0.7)
    text = open(write_pipeline_report(str(tmp_path), summary)).read()
    assert "**First answers: NOT learned.**" in text and "**Refinement: NOT learned.**" in text


def test_the_warm_starts_own_check_records_and_reports_its_temperature(tmp_path):
    """SFT's sample check runs a real (untrained, tiny) model; the report names the check's temperature, which
    is SFT's `check_temperature`, not the RL run's."""
    from grpo_synthetic import build_tiny_dir
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from jobs.pipeline_report import write_pipeline_report
    from train.sft import Example, check_samples

    d = build_tiny_dir(str(tmp_path / "model"))
    model, tok = AutoModelForCausalLM.from_pretrained(d), AutoTokenizer.from_pretrained(d)
    ex = Example("L1/26_matrix_scalar_multiply", "cpu", [{"role": "user", "content": "scale A"}], "```python\nx\n```")
    (check,) = check_samples(model, tok, [ex], samples=2, temperature=0.55, max_tokens=4)
    assert check.to_dict()["temperature"] == 0.55 and check.samples == 2
    rl = tmp_path / "rl"
    rl.mkdir()
    (rl / "metrics.jsonl").write_text("")
    probe = {"tasks": {}, "samples": 0, "fast_share": 0.0, "refine_share": 0.5}
    summary = {"preset": "cpu-tiny", "walls": {"total_s": 1.0}, "wall_s": 1.0, "probe_before": probe,
               "probe_after": probe, "bench": {"source": "failed", "error": "x"}, "rl_out": str(rl),
               "sft": {"examples": 1, "steps": 1, "checks": [check.to_dict()]}}
    assert "2 samples at T=0.55:" in open(write_pipeline_report(str(tmp_path), summary)).read()


def test_the_probe_counts_a_reference_kernel_under_another_extension_name_as_that_kernel():
    """RL drifts a tiny policy's `load_inline(name=...)`, a label that changes nothing computed: the probe
    masks it, and only it (a one-character change to the kernel is `other`; fast and slow stay apart)."""
    from jobs.pipeline import classify, reference_codes, without_extension_name

    for task_id in ("L1/03_silu", "L1/19_softmax", "L1/26_matrix_scalar_multiply"):
        for compact in (False, True):
            refs = reference_codes(task_id, compact)
            assert set(refs) == {"fast", "slow"}
            for label, code in refs.items():
                assert classify(code, refs) == label
                renamed = re.sub(r'name="[^"]*"', 'name="sol_cpu_l1_26_matrix_matrix_multiply"', code, count=1)
                assert renamed != code and classify(renamed, refs) == label
                assert "{" in code and classify(code.replace("{", "{ ", 1), refs) == "other"
    assert classify("", refs) == "other"
    # a string named `name` inside the kernel is the kernel's, not the extension's: it stays compared
    kernel = refs["fast"].replace("#include <torch/extension.h>", '#include <torch/extension.h>\nconst char* name = "a";', 1)
    assert kernel != refs["fast"]
    assert without_extension_name(kernel) != without_extension_name(kernel.replace('name = "a"', 'name = "b"'))
