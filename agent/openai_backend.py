"""Policy backed by any OpenAI-compatible chat-completions server (OpenAI, vLLM serve, SGLang, llama.cpp...).

Speaks through the official `openai` client: one request per conversation, sent concurrently from a
thread pool sharing one client (its connection pool). The client retries what may pass on a second try
(408, 409, 429, 5xx, dropped connections, timeouts) with exponential back-off and jitter, honouring a
server's `Retry-After`; any other 4xx stops with an `OpenAIError` that quotes the server's message,
since retrying a bad request cannot help. The API key comes from `OPENAI_API_KEY` when set; local
servers usually need none, and then no Authorization header is sent at all.

With `stream=True` answers arrive as server-sent chunks and are put back together. Each completion
carries the reply's `usage` block (prompt, completion and reasoning tokens), which
bench and optimize turn into tokens and cost per kernel.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

from agent.policy import Completion, Conversation, SamplingConfig

# Imports inside functions: the openai client (1 s to import) loads when a request is sent, not when this module is
# imported for its records and helpers.


class OpenAIError(RuntimeError):
    """The server refused a request (a 4xx other than rate limiting) or kept failing after all retries."""


class OpenAIPolicy:
    """Chat-completions client; `generate` returns one `Completion` per conversation, in order."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 max_retries: int = 5, concurrency: int = 16, extra_body: dict[str, Any] | None = None,
                 stream: bool = False):
        import openai

        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.api_key = os.environ.get("OPENAI_API_KEY", "") if api_key is None else api_key
        self.max_retries = max_retries
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})
        self.stream = stream
        """Receive each answer as server-sent chunks (long reasoning answers keep the connection busy, so
        proxies that drop idle connections do not cut them); the result is the same."""
        # Without a key the client would refuse to build requests; a placeholder satisfies it and the
        # header is then omitted per request (a local server must not receive a made-up key).
        self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key or "unused",
                                     timeout=timeout_s, max_retries=max_retries)
        self._headers = {} if self.api_key else {"Authorization": openai.Omit()}

    def generate(self, prompts: list[Conversation], sampling: SamplingConfig) -> list[Completion]:
        if not prompts:
            return []
        start = time.perf_counter()
        jobs = [(p, sampling, i) for i, p in enumerate(prompts)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(jobs)))) as pool:
            replies = list(pool.map(lambda job: self._request(*job), jobs))
        elapsed = time.perf_counter() - start
        return [_completion(r, elapsed) for r in replies]

    def _request(self, messages: Conversation, sampling: SamplingConfig, index: int) -> Any:
        import openai

        extra = dict(self.extra_body)
        kwargs: dict[str, Any] = dict(model=self.model, messages=messages, temperature=sampling.temperature,
                                      top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                                      seed=sampling.seed_of(index), n=1)
        if sampling.logprobs:
            kwargs["logprobs"] = True
        if self.stream:
            kwargs.update(stream=True, stream_options={"include_usage": True})
        # Settings given in extra_body win over the defaults above (e.g. max_completion_tokens servers).
        for key in list(extra):
            if key in kwargs:
                kwargs[key] = extra.pop(key)
        try:
            reply = self._client.chat.completions.create(**kwargs, extra_body=extra or None,
                                                         extra_headers=self._headers)
            return _gather(reply) if self.stream else reply
        except openai.APIStatusError as e:
            last = f"HTTP {e.status_code}: {_error_message(e)}"
            if _retryable(e.status_code):
                raise OpenAIError(f"{self.url} failed after {self.max_retries + 1} attempts (last: {last})") from None
            raise OpenAIError(f"{self.url} refused the request ({last})") from None
        except openai.APIConnectionError as e:  # APITimeoutError is one
            cause = e.__cause__ or e
            raise OpenAIError(f"{self.url} failed after {self.max_retries + 1} attempts "
                              f"(last: {type(e).__name__}: {cause})") from None
        except openai.APIResponseValidationError as e:
            raise OpenAIError(f"{self.url}: 200 with a body that is not a chat completion: {e}") from None


def _gather(chunks: Any) -> Any:
    """A streamed answer put back together in the shape of a whole reply (content, reasoning, logprobs,
    finish reason, and the usage block the last chunk carries)."""

    content, reasoning, logprobs, finish, usage = [], [], [], "", None
    for chunk in chunks:
        usage = getattr(chunk, "usage", None) or usage
        for choice in getattr(chunk, "choices", None) or []:
            delta = choice.delta
            content.append(getattr(delta, "content", None) or "")
            reasoning.append(_extra(delta, "reasoning_content") or _extra(delta, "reasoning") or "")
            if choice.logprobs is not None:
                logprobs.extend(getattr(choice.logprobs, "content", None) or [])
            finish = choice.finish_reason or finish
    message = SimpleNamespace(content="".join(content), reasoning_content="".join(reasoning))
    choice = SimpleNamespace(message=message, finish_reason=finish,
                             logprobs=SimpleNamespace(content=logprobs) if logprobs else None)
    return SimpleNamespace(choices=[choice], usage=usage)


def _retryable(status: int) -> bool:
    """The statuses the client retries (its rule: 408, 409, 429 and every 5xx)."""
    return status in (408, 409, 429) or status >= 500


def _error_message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or json.dumps(err))[:300]
        return str(err)[:300]
    return str(getattr(e, "message", "") or e)[:300]


def _extra(obj: Any, key: str) -> Any:
    """A field the server added beyond the OpenAI schema (kept by the client as an extra attribute)."""
    if obj is None:
        return None
    value = getattr(obj, key, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(key)
    return value


def usage_counts(usage: Any) -> tuple[int, int, int]:
    """(prompt, completion, reasoning) tokens of a reply's `usage` block; zeros where the server gives none.

    Reasoning tokens are part of the completion tokens (OpenAI's and vLLM's convention), so cost is
    prompt x input price + completion x output price."""
    if usage is None:
        return 0, 0, 0
    details = _extra(usage, "completion_tokens_details")
    reasoning = _extra(details, "reasoning_tokens") if not isinstance(details, dict) else details.get("reasoning_tokens")
    return int(_extra(usage, "prompt_tokens") or 0), int(_extra(usage, "completion_tokens") or 0), int(reasoning or 0)


def _completion(reply: Any, elapsed_s: float) -> Completion:
    choices = getattr(reply, "choices", None) or []
    if not choices:
        dump = reply.model_dump_json() if hasattr(reply, "model_dump_json") else str(reply)
        raise OpenAIError(f"reply without choices: {dump[:300]}")
    choice = choices[0]
    msg = choice.message
    # Reasoning servers put the chain of thought beside the answer: vLLM and DeepSeek use
    # `reasoning_content`, OpenRouter and newer vLLM `reasoning`. It is kept apart and never re-sent.
    reasoning = _extra(msg, "reasoning_content") or _extra(msg, "reasoning") or ""
    entries = (getattr(choice.logprobs, "content", None) or []) if choice.logprobs else []
    logprobs = tuple(float(t.logprob) for t in entries)
    # vLLM's `return_tokens_as_token_ids` spells each token as "token_id:<id>"; other servers give text.
    tokens = [str(t.token) for t in entries]
    ids = tuple(int(t.split(":", 1)[1]) for t in tokens) if tokens and all(
        t.startswith("token_id:") and t[9:].isdigit() for t in tokens) else ()
    prompt_tokens, completion_tokens, reasoning_tokens = usage_counts(getattr(reply, "usage", None))
    return Completion(text=msg.content or "", reasoning=str(reasoning), logprobs=logprobs, token_ids=ids,
                      finish_reason=str(choice.finish_reason or ""), generate_s=elapsed_s,
                      prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      reasoning_tokens=reasoning_tokens)
