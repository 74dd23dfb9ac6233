"""Generation through TRL's vLLM integration, with a stand-in engine (`vllm_standin`: vLLM has no CPU wheel):
one weight sync per step in colocate mode, and equal collective calls per rank in server mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from train import vllm_standin
from grpo_synthetic import build_tiny_dir
from train.generation import generation_policy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERSATION = [{"role": "user", "content": "write a kernel"}]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> str:
    return build_tiny_dir(str(tmp_path_factory.mktemp("tiny") / "model"))


def _colocated(tiny_dir: str, monkeypatch, sleep: bool):
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    vllm_standin.install_sampling_params(monkeypatch)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    vg = vllm_standin.StandInVLLMGeneration(model, Accelerator(cpu=True), tokenizer, mode="colocate",
                                            enable_sleep_mode=sleep, max_completion_length=8)
    return vllm_standin.StandInTrainer(vllm_generation=vg, accelerator=vg.accelerator), tokenizer, model


@pytest.mark.parametrize("sleep", [True, False])
def test_colocate_syncs_the_weights_once_per_step_whatever_the_number_of_calls(tiny_dir, monkeypatch, sleep):
    """Three turns' calls in one rollout push the weights once (with sleep mode, TRL alone pushed them again
    before every call after the first: its `generate` sleeps at level 2, discarding them); the next step, and a
    held-out rollout that finds the weights asleep, push them again; the engine sleeps once per rollout."""
    trainer, tokenizer, model = _colocated(tiny_dir, monkeypatch, sleep)
    llm, params = trainer.vllm_generation.llm, sum(1 for _ in model.parameters())
    for step in (0, 1):
        trainer.state.global_step = step
        trainer.vllm_generation.sync_weights()  # as GRPOTrainer does before it calls the rollout function
        with generation_policy(trainer, tokenizer, "vllm", training=True) as policy:
            for _ in range(3):
                outs = policy.generate([CONVERSATION, CONVERSATION], None)
                assert [list(c.token_ids) for c in outs] == [vllm_standin.answer_for(list(c.prompt_token_ids)) for c in outs]
                assert all(vllm_standin.finite(c.logprobs) for c in outs)
        assert llm.tensors_loaded == params * (step + 1), f"step {step}: {llm.tensors_loaded / params:.1f} syncs"
    assert llm.generate_calls == [2] * 6
    with generation_policy(trainer, tokenizer, "vllm", training=False) as policy:  # held-out evaluation, same step
        policy.generate([CONVERSATION], None)
    assert llm.tensors_loaded == params * (3 if sleep else 2)  # asleep: discarded, so pushed; awake: kept
    if sleep:
        assert llm.events.count("sleep:2") == 1 + 3  # at start-up, then once per rollout
        assert trainer.vllm_generation.enable_sleep_mode and trainer.engine_weights.asleep
    else:
        assert not any(e.startswith("sleep") for e in llm.events)


def test_colocate_sleep_mode_is_restored_when_a_rollout_raises(tiny_dir, monkeypatch):
    trainer, tokenizer, _ = _colocated(tiny_dir, monkeypatch, True)
    with pytest.raises(RuntimeError):
        with generation_policy(trainer, tokenizer, "vllm", training=False) as policy:
            policy.generate([CONVERSATION], None)
            raise RuntimeError("the evaluator failed")
    vg = trainer.vllm_generation
    assert vg.enable_sleep_mode and trainer.engine_weights.asleep and vg.llm.events[-1] == "sleep:2"


def test_server_mode_ranks_make_equal_collective_calls_under_duplicates_and_resume(tiny_dir, tmp_path):
    """Two gloo ranks, the real rollout, TRL's real server-mode `generate` (`collective_generation_worker.py`):
    rank 0 draws one task twice, rank 1 resumes a logged step. Both finish; every completion a rank receives
    answers its own prompt; the ranks took part in the same number of rounds; one weight push per step. Before
    the rounds, rank 1's first TRL gather met rank 0's broadcast and the group timed out (60 s)."""
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           os.path.join(ROOT, "tests", "collective_generation_worker.py"), tiny_dir, str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    r0, r1 = (json.load(open(tmp_path / f"rank{r}.json")) for r in (0, 1))
    assert r0["rounds"] == r1["rounds"] and all(n > 0 for n in r0["rounds"])
    assert r0["all_own"] and r1["all_own"] and r0["finite_logprobs"] and r1["finite_logprobs"]
    assert r0["completions"] == 2 * (2 * 2 * 2)  # 2 steps x 2 task slots x 2 trajectories x 2 turns
    assert r1["completions"] == 1 * (1 * 2 * 2)  # step 0 resumed from its log: step 1 only
    assert len(r0["client_calls"]) == sum(r0["rounds"]) - r0["rounds"].count(0)
    assert r0["weight_pushes"] == 2 and r0["tensors_pushed"] == 2 * r0["parameters"]
