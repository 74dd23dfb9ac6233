#!/usr/bin/env python3
"""Rehearse a GPU preset on CPU: its training path, with the model and the GPU-only parts replaced.

    python3 -m torch.distributed.run --standalone --nproc_per_node 2 scripts/rehearse_preset.py \
        --config configs/qwen3-8b-8gpu.yaml --model TINY_MODEL_DIR --out runs/rehearse-8b

What stays the preset's: TRL's GRPOTrainer under torchrun with its arguments as `train/trl_args.py` builds
them (loss `dr_grpo`, clip ε, KL, learning rate and warm-up, gradient clipping, `grad_steps_per_batch`,
micro-batch, gradient checkpointing, the importance-sampling correction), the LoRA adapter (rank, alpha, all
linear layers), the batch arithmetic (tasks_per_batch × trajectories × turns samples, each rank's share of
whole task groups), the multi-turn rollout (`train/multiturn_rollout.py`, `agent/episode.py` and its
per-step log), and TRL's own vLLM generation class in the preset's mode (weight sync with the LoRA merge,
sleep mode, the collective rounds of `train/generation.py`).
What is replaced, because it cannot run here: the model (`--model`, a tiny one), the vLLM engine
(`train/vllm_standin.py`: it answers with one of a few canned kernels, log-probs unknown), the harness
(verdicts by which canned kernel came back: the harness is rehearsed by its own tests), CUDA (the run is on
CPU, so the preset's bf16 autocast is off), the GPU layout (a CPU run has none) and the prompt style
(`compact`: the tiny tokenizer spends about a token per character).
Prints one line per step; exits non-zero if a step fails or the rewards carry no signal (every reward
equal: nothing would train).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from concurrent.futures import Future
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

KERNELS = {
    "fast": "return torch.relu(x)  # one fused pass",
    "slow": "return torch.relu(x.clone())  # an extra copy",
    "wrong": "return x  # forgot the activation",
}
"""The stand-in engine's answers, by the verdict the stand-in evaluator gives them."""


def canned_answer(tokenizer):
    """prompt ids -> one of the canned answers, varied per call (a group's prompts are identical)."""
    calls = {"n": 0}

    def answer(prompt_ids: list[int]) -> list[int]:
        calls["n"] += 1
        h = hashlib.sha256(f"{prompt_ids[-16:]}|{calls['n']}".encode()).digest()[0]
        kind = list(KERNELS)[h % len(KERNELS)]
        text = (f"<summary>{kind} variant</summary>\n```python\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n"
                f"    def forward(self, x):\n        {KERNELS[kind]}\n```\n")
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]

    return answer


class CannedVerdicts:
    """The harness's stand-in: the verdict of a canned kernel, by which one it is."""

    def submit(self, task, candidate_src: str, group: str = "") -> Future:
        from kernelbench.harness.result import CORRECT, INCORRECT, EvalResult

        fut: Future = Future()
        if KERNELS["fast"] in candidate_src:
            fut.set_result(EvalResult(status=CORRECT, correct=True, speedup=1.6, feedback="correct, 1.6x"))
        elif KERNELS["slow"] in candidate_src:
            fut.set_result(EvalResult(status=CORRECT, correct=True, speedup=0.6, feedback="correct, 0.6x"))
        else:
            fut.set_result(EvalResult(status=INCORRECT, feedback="output mismatch"))
        return fut


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="the GPU preset to rehearse")
    ap.add_argument("--model", required=True, help="a tiny model folder (tests/grpo_synthetic.build_tiny_dir)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args(argv)

    import trl.trainer.grpo_trainer as trl_grpo
    from transformers import AutoTokenizer

    from train import grpo, vllm_standin
    from train.config import TrainConfig
    from train.presets import load_config
    from train.multiturn_rollout import scoring_of
    from train.rollout import HarnessRollout

    preset = load_config(TrainConfig, args.config, "train")
    if preset.backend != "vllm":
        raise SystemExit(f"{args.config}: backend {preset.backend}; the rehearsal is for the vLLM presets")
    config = replace(preset, model=args.model, device="cpu", out=args.out, steps=args.steps, tasks="L1/01_relu,L1/03_silu",
                     checkpoint_every=1000, eval_every=0, tensorboard=False, trackers=(), torch_threads=1,
                     vllm_server_host=preset.vllm_server_host or "127.0.0.1",
                     # the task source and one line of instructions: the tiny tokenizer spends a token on about
                     # every character, and the full prompt made each step's 512 samples 2.3M tokens
                     prompt=replace(preset.prompt, style="compact"))
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    vllm_standin.StandInVLLMGeneration.answer = staticmethod(canned_answer(tokenizer))
    # the stand-in does not know the tiny model's probabilities: unknown (NaN), so TRL's importance-sampling
    # correction applies none, instead of a ratio against a made-up number that scales every gradient away
    vllm_standin.StandInVLLMGeneration.logprob = float("nan")
    trl_grpo.VLLMGeneration = vllm_standin.StandInVLLMGeneration  # TRL builds its generation class by this name
    vllm_standin.install_sampling_params()
    rank = int(os.environ.get("RANK", "0"))
    rollout = HarnessRollout(evaluator=CannedVerdicts(), trajectories=config.trajectories, turns=config.turns,
                             sampling=config.sampling, prompt_settings=config.prompt,
                             log_dir=os.path.join(args.out, "trajectories"), score=scoring_of(config).score, rank=rank,
                             streaming=config.streaming_turns)
    seen: dict = {}
    result = grpo.main(config, rollout=rollout, trainer_hook=lambda t: seen.update(trainer=t))
    trainer = seen["trainer"]
    vg = trainer.vllm_generation
    engine = vg.llm if vg.mode == "colocate" else vg.vllm_client
    prefix = getattr(trainer.model, "prefix", "\0")  # peft's adapter prefix: adapters are merged, not pushed
    params = sum(1 for name, _ in trainer.model.named_parameters() if prefix not in name)
    if rank == 0:
        rows = [json.loads(line) for line in open(os.path.join(args.out, "metrics.jsonl"))]
        rewards = {round(r.get("reward/mean_return", 0.0), 6) for r in rows}
        pushed = getattr(engine, "tensors_loaded", getattr(engine, "tensors_pushed", 0))
        print(json.dumps({"steps": result.steps_done, "samples_per_step": [r.get("perf/samples") for r in rows],
                          "mean_return": [r.get("reward/mean_return") for r in rows],
                          "reward_std": [r.get("reward/std_return", r.get("reward/return_std")) for r in rows],
                          "loss": [r.get("loss/policy") for r in rows], "grad_norm": [r.get("loss/grad_norm") for r in rows],
                          "step_s": [r.get("perf/step_s") for r in rows], "engine_calls": len(engine.generate_calls),
                          "weights_pushed": pushed, "model_tensors": params}))
        if result.steps_done != args.steps or not rows:
            return 1
        if len(rewards) == 1 and all(r.get("reward/correct_share", 0) in (0.0, 1.0) for r in rows):
            print("every reward equal: nothing to learn from", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
