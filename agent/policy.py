"""The policy seam: anything that turns a batch of chat conversations into completions.

Three backends implement it (`--backend`): `hf` (transformers, CPU or GPU), `vllm` (offline engine, GPU)
and `openai` (any chat-completions server); `agent.backends` builds the one named. The episode code sees
only `Policy.generate`, so training, benchmarks and the `optimize` assistant run unchanged on any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

import pydantic
import pydantic.dataclasses

from agent.parsing import strip_reasoning

Message = dict[str, str]
"""One chat message: `{"role": "system" | "user" | "assistant", "content": "..."}`."""
Conversation = list[Message]


@pydantic.dataclasses.dataclass(frozen=True, config=pydantic.ConfigDict(extra="forbid"))
class SamplingConfig:
    """Sampling settings shared by every backend (validated on construction: docs/architecture.md, "Configuration")."""

    temperature: float = 0.9
    """Softmax temperature; 0 means greedy. Kevin-32B samples at 0.9 in training and at test time."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 keeps the whole distribution)."""
    max_tokens: int = 4096
    """Most tokens generated per completion (reasoning included)."""
    seed: int = 0
    """Base seed; completion i of a call uses `seed + i` where the backend supports per-request seeds."""
    logprobs: bool = True
    """Ask for per-token log-probabilities (hf always computes them; openai only when the server gives them)."""
    seeds: tuple[int, ...] = ()
    """Per-prompt seeds of one call, in prompt order, in place of `seed + i`; set per call by the episode
    runner (one per task group, trajectory and turn), not in configs. Why per prompt: a runner that streams
    turns batches whatever prompts are ready, so which call a prompt lands in depends on timing; a seed of
    its own keeps its draws the same when the run is repeated (hf, vllm and openai honour it; TRL's vLLM
    takes no seed per call at all, `train.generation.TRLVLLMPolicy`)."""

    def seed_of(self, i: int) -> int:
        """The seed of prompt `i` of a call: its own when `seeds` is set, else `seed + i`."""
        if not self.seeds:
            return self.seed + i
        if len(self.seeds) <= i:
            raise ValueError(f"sampling.seeds holds {len(self.seeds)} seeds; prompt {i} has none")
        return self.seeds[i]


@dataclass(frozen=True)
class Completion:
    """One sampled answer.

    `text` is what the model wrote as its answer (inline `<think>` blocks included, as generated);
    `reasoning` is a chain of thought the server returned in a separate field. Neither reaches later
    prompts: parsing keeps only the code and the summary.
    """

    text: str
    reasoning: str = ""
    """Separate reasoning field (`reasoning_content` / `reasoning`) when the backend returns one."""
    token_ids: tuple[int, ...] = ()
    """Generated token ids (end-of-turn token included), empty when the backend cannot give them."""
    logprobs: tuple[float, ...] = ()
    """Log-probability of each generated token under the temperature-scaled distribution, aligned with
    `token_ids` (openai: aligned with the server's tokens when it returns logprobs)."""
    prompt_token_ids: tuple[int, ...] = ()
    """The tokenised prompt, when the backend tokenised it locally."""
    finish_reason: str = ""
    """`stop` (end of turn) or `length` (hit max_tokens), as the backend reports it."""
    generate_s: float = 0.0
    """Wall time of the call that produced this completion (a batched call: the whole batch)."""
    prompt_tokens: int = 0
    """Tokens of the prompt as the backend counted them (the server's `usage` for openai); 0 when unknown."""
    completion_tokens: int = 0
    """Tokens generated, reasoning included (what an API bills as output); 0 when unknown."""
    reasoning_tokens: int = 0
    """Of `completion_tokens`, those spent on reasoning (a separate field or inline `<think>` blocks)."""

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "reasoning": self.reasoning, "token_ids": list(self.token_ids),
                "logprobs": list(self.logprobs), "prompt_token_ids": list(self.prompt_token_ids),
                "finish_reason": self.finish_reason, "generate_s": self.generate_s,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "reasoning_tokens": self.reasoning_tokens}


@runtime_checkable
class Policy(Protocol):
    """A model behind one method: one completion per conversation, in order."""

    def generate(self, prompts: list[Conversation], sampling: SamplingConfig) -> list[Completion]: ...


def count_tokens_approx(text: str) -> int:
    """Token estimate for backends without a local tokenizer: about 4 characters per token for code and English."""
    return (len(text) + 3) // 4


def inline_reasoning_tokens(text: str, count_tokens: Callable[[str], int]) -> int:
    """Tokens of the inline `<think>` blocks of an answer: its count less that of the answer without them."""
    if "think" not in text.lower():
        return 0

    return max(0, count_tokens(text) - count_tokens(strip_reasoning(text)))
