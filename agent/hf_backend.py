"""Policy backed by a transformers causal LM, on CPU or GPU, sampling a whole batch in one `generate` call.

Returns token ids and per-token log-probabilities, which the trainer needs. Log-probabilities are
taken under the temperature-scaled distribution (raw logits / T, before top-p truncation): the
quantity a GRPO trainer recomputes for the same tokens, so the two can be compared directly.

A call with per-prompt seeds (`SamplingConfig.seeds`: the episode runner's) samples each row with a generator
of its own (`RowSampler`), so a prompt draws the same tokens whichever prompts share its batch (up to the
float noise of different padding): what keeps a run with streamed turns repeatable. A call without them
seeds torch's global generator once per chunk (`seed + start`), as before, so the warm start's own check and
the pipeline's probes draw what they drew.
"""

from __future__ import annotations

import time
from typing import Any

from agent.policy import Completion, Conversation, SamplingConfig, inline_reasoning_tokens

# Imports inside functions: torch and transformers (0.1-3 s each to import) load when a local model generates, not
# when this module is imported for its records and helpers.


class HFPolicy:
    """Wraps a loaded model and tokenizer; `generate` pads on the left and samples all prompts together."""

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 16):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        """Most prompts per `generate` call (bounds memory; larger batches are split)."""
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        self.stop_ids = _stop_ids(model, tokenizer)

    @classmethod
    def from_pretrained(cls, path: str, *, device: str = "cpu", dtype: str = "auto", **options: Any) -> "HFPolicy":
        """Load a checkpoint directory or hub name already present locally (no download is attempted offline)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch_dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16,
                       "float16": torch.float16}[dtype]
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype).to(device).eval()
        return cls(model, tokenizer, **options)

    def count_tokens(self, text: str) -> int:
        """Exact token count with this model's tokenizer (used for the prompt budget)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def render(self, messages: Conversation) -> str:
        """The prompt text the model sees: its chat template with the assistant header appended."""
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def generate(self, prompts: list[Conversation], sampling: SamplingConfig) -> list[Completion]:
        out: list[Completion] = []
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start:start + self.batch_size]
            out.extend(self._generate_batch(chunk, sampling, start))
        return out

    def _generate_batch(self, prompts: list[Conversation], sampling: SamplingConfig, start: int) -> list[Completion]:
        import torch
        from transformers import LogitsProcessorList

        t0 = time.perf_counter()
        texts = [self.render(p) for p in prompts]
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        device = next(self.model.parameters()).device
        enc = {k: v.to(device) for k, v in enc.items()}
        greedy = sampling.temperature <= 0
        kwargs: dict[str, Any] = dict(max_new_tokens=sampling.max_tokens, do_sample=not greedy,
                                      return_dict_in_generate=True, output_logits=True,
                                      pad_token_id=self.tokenizer.pad_token_id,
                                      eos_token_id=sorted(self.stop_ids))
        if sampling.seeds and not greedy:
            # transformers' own warpers off (temperature 1, no top-k/top-p): the row sampler applies them and
            # leaves one finite logit per row, which transformers' sampling step can only pick.
            rows = RowSampler([sampling.seed_of(start + i) for i in range(len(prompts))], sampling.temperature,
                              sampling.top_p)
            kwargs.update(temperature=1.0, top_p=1.0, top_k=0, logits_processor=LogitsProcessorList([rows]))
        else:
            if not greedy:
                kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
            torch.manual_seed(sampling.seed + start)
        with torch.no_grad():
            gen = self.model.generate(**enc, **kwargs)
        prompt_len = enc["input_ids"].shape[1]
        new_ids = gen.sequences[:, prompt_len:]
        logits = torch.stack(gen.logits, dim=1).float()  # [batch, new tokens, vocab], raw model logits
        scale = 1.0 if greedy else sampling.temperature
        token_lp = torch.log_softmax(logits / scale, dim=-1).gather(-1, new_ids.unsqueeze(-1)).squeeze(-1)
        elapsed = time.perf_counter() - t0
        results = []
        for row in range(new_ids.shape[0]):
            ids = new_ids[row].tolist()
            n, finish = _length_to_eos(ids, self.stop_ids)
            prompt_ids = enc["input_ids"][row][enc["attention_mask"][row].bool()].tolist()
            text = self.tokenizer.decode(ids[:n], skip_special_tokens=True)
            results.append(Completion(
                text=text, token_ids=tuple(ids[:n]), logprobs=tuple(token_lp[row, :n].tolist()),
                prompt_token_ids=tuple(prompt_ids), finish_reason=finish, generate_s=elapsed,
                prompt_tokens=len(prompt_ids), completion_tokens=n,
                reasoning_tokens=inline_reasoning_tokens(text, self.count_tokens)))
        return results


class RowSampler:
    """A transformers logits processor that samples every row with its own CPU generator: temperature, then
    top-p (the smallest set of most likely tokens holding `top_p` of the mass), then one uniform draw per row
    and step mapped through the row's cumulative distribution. It returns logits that are -inf but for the
    token drawn, so the generation loop's own sampling step picks that token."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float):
        import torch

        self.generators = [torch.Generator().manual_seed(s) for s in seeds]
        self.temperature, self.top_p = temperature, top_p

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            before = sorted_p.cumsum(dim=-1) - sorted_p  # mass of the likelier tokens
            probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p.masked_fill(before >= self.top_p, 0.0))
        cdf = probs.cumsum(dim=-1)
        u = torch.stack([torch.rand((), generator=g) for g in self.generators]).to(cdf.device)
        # right=True: the first token whose cumulative mass exceeds the draw, never a token of zero mass
        pick = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1).contiguous(), right=True)
        pick = pick.clamp_(max=scores.shape[-1] - 1)
        return torch.full_like(scores, float("-inf")).scatter_(-1, pick, 0.0)


def _stop_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-turn tokens: the tokenizer's eos, the model's generation eos ids, and ChatML's `<|im_end|>`
    (a base checkpoint's eos is often `<|endoftext|>` while its chat template closes turns with `<|im_end|>`)."""
    ids = {tokenizer.eos_token_id}
    gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(gen if isinstance(gen, (list, tuple)) else [gen])
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    return {i for i in ids if isinstance(i, int) and i >= 0}


def _length_to_eos(ids: list[int], stop_ids: set[int]) -> tuple[int, str]:
    """Tokens up to and including the first end-of-turn token (the rest is padding of the batch)."""
    for i, t in enumerate(ids):
        if t in stop_ids:
            return i + 1, "stop"
    return len(ids), "length"
