"""Policy backed by vLLM's offline engine (GPU only; `pip install -e .[gpu]`).

vLLM is imported when the policy is built, never at module import, so CPU code paths never need it.
Identical conversations in one call (every trajectory's first turn) become one request with `n`
samples, which lets vLLM share the prompt's KV cache among them, as Kevin-32B's rollouts did. Each prompt
keeps its own seed (`SamplingConfig.seed_of`): vLLM (V1) runs a request of `n` samples as `n` child requests
seeded `seed + k` (`vllm/v1/engine/parallel_sampling.py`), so identical prompts share a request only while
their seeds run on by one; the draws are then what `n` separate requests would have drawn.
"""

from __future__ import annotations

import time
from typing import Any

from agent.policy import Completion, Conversation, SamplingConfig, inline_reasoning_tokens

# Imports inside functions: optional or GPU-only libraries (vLLM, the `gpu` extra) are imported only where they are
# used, so a machine without them runs everything else.


class VLLMPolicy:
    """`generate` groups identical prompts, asks for `n` samples of each, and returns them in input order."""

    def __init__(self, model: str, **engine_options: Any):
        from vllm import LLM

        # Log-probabilities after temperature, like the hf backend's and like a GRPO trainer recomputes.
        engine_options.setdefault("logprobs_mode", "processed_logprobs")
        self.llm = LLM(model=model, **engine_options)
        self.tokenizer = self.llm.get_tokenizer()

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, prompts: list[Conversation], sampling: SamplingConfig) -> list[Completion]:
        from vllm import SamplingParams

        order = _requests(prompts, sampling)
        params = [SamplingParams(n=len(idx), temperature=sampling.temperature, top_p=sampling.top_p,
                                 max_tokens=sampling.max_tokens, seed=sampling.seed_of(idx[0]),
                                 logprobs=0 if sampling.logprobs else None) for idx in order]
        t0 = time.perf_counter()
        outputs = self.llm.chat([prompts[idx[0]] for idx in order], sampling_params=params, use_tqdm=False)
        elapsed = time.perf_counter() - t0
        results: list[Completion | None] = [None] * len(prompts)
        for idx, request in zip(order, outputs):
            for i, sample in zip(idx, request.outputs):
                ids = tuple(sample.token_ids)
                lps = tuple(step[t].logprob for t, step in zip(ids, sample.logprobs or [])) if sample.logprobs else ()
                prompt_ids = tuple(request.prompt_token_ids or ())
                results[i] = Completion(text=sample.text, token_ids=ids, logprobs=lps, prompt_token_ids=prompt_ids,
                                        finish_reason=str(sample.finish_reason or ""), generate_s=elapsed,
                                        prompt_tokens=len(prompt_ids), completion_tokens=len(ids),
                                        reasoning_tokens=inline_reasoning_tokens(sample.text, self.count_tokens))
        return [r for r in results if r is not None]


def _requests(prompts: list[Conversation], sampling: SamplingConfig) -> list[list[int]]:
    """Prompt indices per request: identical prompts whose seeds run on by one (`seed_of(i) = first + k`)
    share a request of `n` samples; any other prompt starts a request of its own."""
    open_by_text: dict[str, list[int]] = {}
    order: list[list[int]] = []
    for i, p in enumerate(prompts):
        key = repr(p)
        idx = open_by_text.get(key)
        if idx is not None and sampling.seed_of(i) == sampling.seed_of(idx[0]) + len(idx):
            idx.append(i)
            continue
        idx = open_by_text[key] = [i]
        order.append(idx)
    return order
