"""Trajectories -> per-turn samples: returns, per-task advantages, token layout of the padded micro-batch."""

from __future__ import annotations

import pytest
import torch

from agent.episode import Trajectory, Turn
from kernelbench.result import CORRECT, FORMAT_ERROR, EvalResult
from train.samples import build_samples, collate, status_shares, trajectory_returns


def _turn(i: int, score: float, ids=(5, 6), lps=(-0.1, -0.2), prompt="p") -> Turn:
    status = CORRECT if score > 0 else FORMAT_ERROR
    return Turn(index=i, prompt=[{"role": "user", "content": prompt}], response="r", reasoning="", summary="",
                candidate="", result=EvalResult(status=status, correct=score > 0, score=score), score=score,
                token_ids=tuple(ids), logprobs=tuple(lps))


def _encode_prompt(conv):
    return [ord(c) for c in conv[-1]["content"]]


def _encode_text(text):
    return [1] * len(text)


def test_returns_are_discounted_sums_of_later_scores():
    traj = Trajectory("A", "0", (_turn(0, 0.0), _turn(1, 1.3), _turn(2, 0.6)))
    assert trajectory_returns(traj, 0.4, "sum") == pytest.approx([0.4 * 1.3 + 0.16 * 0.6, 1.3 + 0.4 * 0.6, 0.6])
    assert trajectory_returns(traj, 0.8, "max") == pytest.approx([0.8 * 1.3, 1.3, 0.6])


def test_advantages_are_normalised_within_each_task_only():
    trajs = [Trajectory("A", "0", (_turn(0, 1.0), _turn(1, 1.0))), Trajectory("A", "1", (_turn(0, 0.0), _turn(1, 0.0))),
             Trajectory("B", "0", (_turn(0, 5.0),)), Trajectory("B", "1", (_turn(0, 5.0),))]
    samples = build_samples(trajs, _encode_prompt, _encode_text, gamma=0.4)
    a = [s.advantage for s in samples if s.task_id == "A"]
    b = [s.advantage for s in samples if s.task_id == "B"]
    assert sum(a) == pytest.approx(0.0, abs=1e-9) and a[0] > 0 and a[2] < 0
    assert b == [0.0, 0.0]  # equal returns within task B: no signal, whatever task A's scale
    assert [s.ret for s in samples[:2]] == pytest.approx([1.4, 1.0])


def test_inherited_turns_are_context_not_samples():
    traj = Trajectory("A", "r1/0", (_turn(0, 2.0), _turn(1, 0.0)), inherited_turns=1)
    samples = build_samples([traj], _encode_prompt, _encode_text)
    assert [s.turn_index for s in samples] == [1]


def test_missing_token_ids_fall_back_to_tokenising_and_logprobs_must_align():
    t = _turn(0, 1.0, ids=(), lps=())
    u = _turn(0, 1.0, ids=(1, 2, 3), lps=(-0.5,))  # misaligned logprobs are dropped, not guessed
    samples = build_samples([Trajectory("A", "0", (t,)), Trajectory("A", "1", (u,))], _encode_prompt, _encode_text)
    assert samples[0].completion_ids == (1,) and samples[0].rollout_logprobs == ()
    assert samples[1].rollout_logprobs == ()


def test_collate_aligns_completions_at_one_column():
    trajs = [Trajectory("A", "0", (_turn(0, 1.0, ids=(7, 8, 9), lps=(-1, -2, -3), prompt="ab"),)),
             Trajectory("A", "1", (_turn(0, 0.0, ids=(4,), lps=(-4,), prompt="abcd"),))]
    samples = build_samples(trajs, _encode_prompt, _encode_text)
    mb = collate(samples, [0, 1], pad_id=0)
    assert mb.input_ids.tolist() == [[0, 0, 97, 98, 7, 8, 9], [97, 98, 99, 100, 4, 0, 0]]
    assert mb.attention_mask.tolist() == [[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]]
    assert mb.position_ids[0].tolist()[2:] == [0, 1, 2, 3, 4]
    assert mb.completion_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert mb.rollout_logprobs[0].tolist() == [-1, -2, -3] and torch.isnan(mb.rollout_logprobs[1, 1])
    assert mb.advantages.tolist() == pytest.approx([samples[0].advantage, samples[1].advantage])


def test_status_shares_cover_every_status():
    samples = build_samples([Trajectory("A", "0", (_turn(0, 1.0), _turn(1, 0.0)))], _encode_prompt, _encode_text)
    shares = status_shares(samples)
    assert shares["correct"] == 0.5 and shares["format_error"] == 0.5 and shares["timeout"] == 0.0
