"""The hf backend with a tiny Qwen3 built locally: batched sampling, token ids, log-probabilities, an episode."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from agent.episode import EpisodeRunner
from agent.hf_backend import HFPolicy
from agent.policy import SamplingConfig
from agent.prompts import PromptSettings, build_messages
from agent.strategies import parallel
from rewards import ScoreConfig
from tests.test_episode import FAST_SRC, RELU_TASK, RELU_TASK_SRC, ScriptedEvaluator
from train.tiny_model import TinyModelConfig, build_tiny

SETTINGS = PromptSettings(device="cpu", hardware="test cpu", token_budget=4096)


@pytest.fixture(scope="module")
def tiny():
    texts = [user["content"] for user in build_messages(RELU_TASK_SRC, [], SETTINGS)] + [FAST_SRC] * 3
    model, tokenizer = build_tiny(texts, TinyModelConfig(vocab_size=1024))
    return HFPolicy(model.eval(), tokenizer, batch_size=3)


def test_batched_sampling_returns_ids_and_logprobs_that_match_a_forward_pass(tiny):
    prompts = [[{"role": "user", "content": "write a relu kernel"}], [{"role": "user", "content": "hi"}],
               [{"role": "user", "content": "a much longer prompt than the other two, to force padding"}],
               [{"role": "user", "content": "fourth, in a second batch"}]]
    sampling = SamplingConfig(temperature=0.8, max_tokens=12, seed=3)
    out = tiny.generate(prompts, sampling)
    assert len(out) == 4
    for c in out:
        assert 1 <= len(c.token_ids) <= 12 and len(c.logprobs) == len(c.token_ids)
        assert all(lp <= 0.0 for lp in c.logprobs) and c.finish_reason in ("stop", "length")
        assert (c.prompt_tokens, c.completion_tokens) == (len(c.prompt_token_ids), len(c.token_ids))
    assert [c.token_ids for c in tiny.generate(prompts, sampling)] == [c.token_ids for c in out]  # seeded
    # Recompute the log-probabilities of the first completion with a plain forward pass (no padding).
    c = out[2]
    ids = torch.tensor([list(c.prompt_token_ids) + list(c.token_ids)])
    with torch.no_grad():
        logits = tiny.model(ids).logits[0, len(c.prompt_token_ids) - 1:-1].float()
    expected = torch.log_softmax(logits / 0.8, dim=-1).gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
    assert torch.allclose(expected, torch.tensor(c.logprobs), atol=1e-4)


def test_per_prompt_seeds_draw_the_same_tokens_whatever_shares_the_batch(tiny):
    """With `SamplingConfig.seeds` each row samples from a generator of its own: a prompt alone, or in another
    batch in another place, draws what it drew; another seed draws otherwise; top-p near 0 is greedy; the
    log-probabilities are still the temperature-scaled model's."""
    prompts = [[{"role": "user", "content": text}] for text in
               ("write a relu kernel", "hi", "a much longer prompt than the other two, to force padding")]
    sampling = SamplingConfig(temperature=1.0, max_tokens=12, seeds=(11, 12, 13))
    together = [c.token_ids for c in tiny.generate(prompts, sampling)]
    [alone] = tiny.generate(prompts[1:2], SamplingConfig(temperature=1.0, max_tokens=12, seeds=(12,)))
    assert alone.token_ids == together[1]
    swapped = tiny.generate([prompts[2], prompts[0]], SamplingConfig(temperature=1.0, max_tokens=12, seeds=(13, 11)))
    assert [c.token_ids for c in swapped] == [together[2], together[0]]
    others = [c.token_ids for c in tiny.generate(prompts, SamplingConfig(temperature=1.0, max_tokens=12,
                                                                        seeds=(21, 22, 23)))]
    assert others != together
    nearly_greedy = tiny.generate(prompts, SamplingConfig(temperature=1.0, top_p=1e-6, max_tokens=12, seeds=(1, 2, 3)))
    greedy = tiny.generate(prompts, SamplingConfig(temperature=0.0, max_tokens=12))
    assert [c.token_ids for c in nearly_greedy] == [c.token_ids for c in greedy]
    c = swapped[0]
    ids = torch.tensor([list(c.prompt_token_ids) + list(c.token_ids)])
    with torch.no_grad():
        logits = tiny.model(ids).logits[0, len(c.prompt_token_ids) - 1:-1].float()
    expected = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
    assert torch.allclose(expected, torch.tensor(c.logprobs), atol=1e-4)


def test_hf_policy_runs_an_episode_end_to_end(tiny, tmp_path, build_cache_dir):
    if importlib.util.find_spec("kernelbench.executors.evaluator"):
        from kernelbench.harness.config import EvalConfig
        from kernelbench.executors.evaluator import Evaluator

        evaluator = Evaluator(EvalConfig(device="cpu", size="cpu", build_cache_dir=build_cache_dir))
    else:
        evaluator = ScriptedEvaluator()
    runner = EpisodeRunner(tiny, evaluator, turns=2, sampling=SamplingConfig(max_tokens=16, seed=1),
                           prompt_settings=SETTINGS, score=ScoreConfig().score, log_path=str(tmp_path / "t.jsonl"))
    assert runner.count_tokens == tiny.count_tokens
    try:
        trajs = parallel(runner, [RELU_TASK], trajectories=2)
    finally:
        getattr(evaluator, "close", lambda: None)()
    assert [t.traj_id for t in trajs] == ["0", "1"]
    for traj in trajs:
        assert [t.index for t in traj.turns] == [0, 1]
        for turn in traj.turns:
            # A random tiny model writes no code block: every answer is a format error, scored 0.
            assert turn.result.status == "format_error" and turn.score == 0.0
            assert len(turn.token_ids) == len(turn.logprobs) >= 1
        assert "Attempt 1" in traj.turns[1].prompt[-1]["content"]
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 2
