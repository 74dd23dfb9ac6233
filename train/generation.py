"""The policies a training rollout samples from: the trainer's own weights (transformers `generate`) or
TRL's vLLM engine, both behind `agent.policy.Policy`."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch


def chat_ids(tokenizer: Any, conversation: Any) -> list[int]:
    """Token ids of a conversation rendered with the chat template and the assistant header, as the hf
    backend encodes them (the template as text, then tokenised without special tokens)."""
    text = tokenizer.apply_chat_template(list(conversation), add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class TRLVLLMPolicy:
    """`agent.policy.Policy` over TRL's vLLM integration (colocate or server): TRL syncs the trainer's weights
    into vLLM before each rollout (LoRA merged first, prefix cache reset). Every rank must make the same
    number of calls (server mode gathers prompts across ranks): each rank rolls out as many tasks."""

    def __init__(self, trainer: Any, tokenizer: Any):
        self.trainer, self.tokenizer = trainer, tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, prompts: list, sampling: Any) -> list:
        from agent.policy import Completion

        t0 = time.perf_counter()
        ids = [chat_ids(self.tokenizer, p) for p in prompts]
        _, completion_ids, logprobs, _ = self.trainer.vllm_generation.generate(ids, None, 1)
        elapsed = time.perf_counter() - t0
        eos = self.tokenizer.eos_token_id
        return [Completion(text=self.tokenizer.decode(c, skip_special_tokens=True), token_ids=tuple(c),
                           logprobs=tuple(float(lp[0]) if lp and lp[0] is not None else float("nan") for lp in lps),
                           prompt_token_ids=tuple(p), finish_reason="stop" if c and c[-1] == eos else "length",
                           generate_s=elapsed)
                for p, c, lps in zip(ids, completion_ids, logprobs)]


@contextlib.contextmanager
def generation_policy(trainer: Any, tokenizer: Any, backend: str):
    """The policy a rollout samples from: the trainer's current weights (transformers `generate`, unwrapped
    from DDP/FSDP/ZeRO-3) or TRL's vLLM engine."""
    if backend == "vllm":
        yield TRLVLLMPolicy(trainer, tokenizer)
        return
    from agent.hf_backend import HFPolicy
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                     gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs) as model:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                yield HFPolicy(model, tokenizer)
        finally:
            model.train(was_training)
