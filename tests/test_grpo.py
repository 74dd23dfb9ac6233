"""GRPO end to end: reward rises under the real update on a synthetic problem; a 2-step harness run."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
import torch

from grpo_synthetic import LowIdRollout, build_tiny_dir
from train import grpo
from train.config import TrainConfig
from train.metrics_log import read_metrics


def _config(model_dir: str, out: str, **kw) -> TrainConfig:
    base = TrainConfig(model=model_dir, tasks="L1/01_relu,L1/03_silu", steps=12, tasks_per_batch=2, trajectories=8,
                       turns=2, max_new_tokens=12, learning_rate=2e-2, grad_clip=1.0, warmup_ratio=0.0,
                       max_staleness=1, tensorboard=False, out=out, checkpoint_every=100, micro_batch_size=16,
                       temperature=1.0, torch_threads=1)
    return replace(base, **kw)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> str:
    return build_tiny_dir(str(tmp_path_factory.mktemp("tiny") / "model"))


def _vocab(path: str) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(path))


def test_reward_rises_under_the_grpo_update(tiny_dir, tmp_path):
    cfg = _config(tiny_dir, str(tmp_path / "run"))
    grpo.main(cfg, rollout=LowIdRollout(_vocab(tiny_dir), 8, 2, 12), say=lambda s: None)
    records = read_metrics(cfg.out)
    assert [r["step"] for r in records] == list(range(12))
    first = sum(r["reward/mean_score"] for r in records[:3]) / 3
    last = sum(r["reward/mean_score"] for r in records[-3:]) / 3
    assert last > first + 0.15, (first, last)
    # the overlapped producer really ran one version behind after step 0
    assert [r["rollout/weights_lag"] for r in records[:3]] == [0.0, 1.0, 1.0]
    assert all(r["loss/grad_norm"] > 0 for r in records)
    saved = json.load(open(os.path.join(cfg.out, "config.json")))
    assert saved["config"]["steps"] == 12 and saved["command"] == "TrainConfig"


def test_trainer_logprobs_match_the_rollout_engine(tiny_dir):
    """The loss's token layout reproduces the log-probs the hf backend sampled with (IS weight ~1 on-policy)."""
    from agent.hf_backend import HFPolicy
    from agent.policy import SamplingConfig
    from train.loss import token_logprobs
    from train.samples import TurnSample, collate

    policy = HFPolicy.from_pretrained(tiny_dir)
    convs = [[{"role": "user", "content": "write"}], [{"role": "user", "content": "a longer prompt here"}]]
    outs = policy.generate(convs, SamplingConfig(temperature=0.9, max_tokens=10, seed=3))
    samples = [TurnSample("A", str(i), 0, o.prompt_token_ids, o.token_ids, o.logprobs, 0.0, 0.0, 1.0, "correct")
               for i, o in enumerate(outs)]
    mb = collate(samples, [0, 1], policy.tokenizer.pad_token_id)
    with torch.no_grad():
        lp = token_logprobs(policy.model, mb, 0.9)
    got = lp[mb.completion_mask.bool()]
    want = mb.rollout_logprobs[mb.completion_mask.bool()]
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


@pytest.mark.slow
def test_two_step_multi_turn_run_with_the_real_harness(tmp_path, build_cache_dir):
    """The cpu-tiny warm start (trained once, cached) through 2 RL steps of 2 turns with the real harness.

    cpu-tiny itself runs one turn; two here prove the multi-turn path (turn-2 prompts carry the first
    kernel and its feedback) with real compiles. The first run trains the warm start (minutes); later runs
    and the pipeline reuse it from ~/.cache/kernel-agent/warm-start."""
    from train.config import load_config
    from train.pipeline import ensure_warm_start

    cfg = load_config(TrainConfig, "cpu-tiny", "train", {"steps": 2, "out": str(tmp_path / "rl")})
    cfg = replace(ensure_warm_start("cpu-tiny", cfg, say=lambda s: None), tasks="L1/03_silu", tasks_per_batch=1,
                  trajectories=2, turns=2, build_cache_dir=build_cache_dir, tensorboard=True)
    grpo.main(cfg, say=lambda s: None)
    records = read_metrics(cfg.out)
    assert [r["step"] for r in records] == [0, 1]
    for key in ("reward/mean_score", "reward/turn1_mean_score", "reward/turn2_mean_score", "loss/policy",
                "loss/grad_norm", "rollout/response_tokens_mean", "rollout/status_correct", "perf/evaluations_per_s",
                "perf/generate_tokens_per_s", "perf/eval_wait_share"):
        assert key in records[0], key
    # the memorised warm start writes kernels that reach the harness and pass it on turn 1
    assert max(r["reward/turn1_mean_score"] for r in records) > 0.3
    assert any(r["rollout/status_correct"] > 0 for r in records)
    lines = [json.loads(x) for x in open(os.path.join(cfg.out, "trajectories", "step_000000.jsonl"))]
    assert len(lines) == 2 and all(len(t["turns"]) == 2 for t in lines)
    second = lines[0]["turns"][1]["prompt"][-1]["content"]
    assert "Attempt 1" in second and lines[0]["turns"][0]["result"]["status"] in second
    assert os.path.isdir(os.path.join(cfg.out, "tb")) and os.path.exists(os.path.join(cfg.out, "final", "config.json"))


def test_reusing_evaluator_evaluates_each_distinct_text_once():
    from concurrent.futures import Future

    from kernelbench.task import Task
    from train.rollout import ReusingEvaluator

    class Counting:
        def __init__(self):
            self.calls = []

        def submit(self, task, src):
            self.calls.append((task.id, src))
            f = Future()
            f.set_result(len(self.calls))
            return f

    inner = Counting()
    ev = ReusingEvaluator(inner)
    a = Task(id="L1/a", level=1, name="a", origin="builtin", source="x")
    b = Task(id="L1/b", level=1, name="b", origin="builtin", source="x")
    futures = [ev.submit(t, s) for t, s in ((a, "k1"), (a, "k1"), (a, "k2"), (b, "k1"), (a, "k2"))]
    assert len(set(map(id, futures))) == 5  # distinct Futures: the episode runner keys its slots by them
    got = [f.result() for f in futures]
    assert got == [1, 1, 2, 3, 2] and inner.calls == [("L1/a", "k1"), ("L1/a", "k2"), ("L1/b", "k1")]
    assert (ev.submitted, ev.reused) == (5, 2)
