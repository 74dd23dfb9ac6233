"""Policy backed by any OpenAI-compatible chat-completions server (OpenAI, vLLM serve, SGLang, llama.cpp...).

One HTTP request per conversation, sent concurrently. Transient failures (429, 5xx, dropped
connections) are retried with exponential back-off; any other 4xx stops with an `OpenAIError` that
quotes the server's message, since retrying a bad request cannot help. The API key comes from
`OPENAI_API_KEY` when set; local servers usually need none.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from agent.policy import Completion, Conversation, SamplingConfig

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class OpenAIError(RuntimeError):
    """The server refused a request (a 4xx other than rate limiting) or kept failing after all retries."""


class OpenAIPolicy:
    """Chat-completions client; `generate` returns one `Completion` per conversation, in order."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 max_retries: int = 5, backoff_s: float = 1.0, concurrency: int = 16,
                 extra_body: dict[str, Any] | None = None):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = os.environ.get("OPENAI_API_KEY", "") if api_key is None else api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})
        self._session = requests.Session()

    def generate(self, prompts: list[Conversation], sampling: SamplingConfig) -> list[Completion]:
        if not prompts:
            return []
        start = time.perf_counter()
        bodies = [self._body(p, sampling, i) for i, p in enumerate(prompts)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(bodies)))) as pool:
            replies = list(pool.map(self._post, bodies))
        elapsed = time.perf_counter() - start
        return [_completion(r, elapsed) for r in replies]

    def _body(self, messages: Conversation, sampling: SamplingConfig, index: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": sampling.temperature,
                                "top_p": sampling.top_p, "max_tokens": sampling.max_tokens,
                                "seed": sampling.seed + index, "n": 1}
        if sampling.logprobs:
            body["logprobs"] = True
        body.update(self.extra_body)
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                resp = self._session.post(self.url, data=json.dumps(body), headers=headers, timeout=self.timeout_s)
            except (requests.ConnectionError, requests.Timeout) as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if resp.status_code == 200:
                try:
                    return resp.json()
                except ValueError:
                    raise OpenAIError(f"{self.url}: 200 with a body that is not JSON: {resp.text[:200]!r}") from None
            last = f"HTTP {resp.status_code}: {_error_message(resp)}"
            if resp.status_code not in RETRY_STATUSES:
                raise OpenAIError(f"{self.url} refused the request ({last})")
        raise OpenAIError(f"{self.url} failed after {self.max_retries + 1} attempts (last: {last})")


def _error_message(resp: requests.Response) -> str:
    try:
        err = resp.json().get("error", "")
        if isinstance(err, dict):
            err = err.get("message", "") or json.dumps(err)
        return str(err) or resp.text[:300]
    except (ValueError, AttributeError):
        return resp.text[:300]


def _completion(reply: dict[str, Any], elapsed_s: float) -> Completion:
    choices = reply.get("choices") or []
    if not choices:
        raise OpenAIError(f"reply without choices: {json.dumps(reply)[:300]}")
    choice = choices[0]
    msg = choice.get("message") or {}
    # Reasoning servers put the chain of thought beside the answer: vLLM and DeepSeek use
    # `reasoning_content`, OpenRouter and newer vLLM `reasoning`. It is kept apart and never re-sent.
    reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
    entries = (choice.get("logprobs") or {}).get("content") or []
    logprobs = tuple(float(t.get("logprob", 0.0)) for t in entries)
    # vLLM's `return_tokens_as_token_ids` spells each token as "token_id:<id>"; other servers give text.
    tokens = [str(t.get("token", "")) for t in entries]
    ids = tuple(int(t.split(":", 1)[1]) for t in tokens) if tokens and all(
        t.startswith("token_id:") and t[9:].isdigit() for t in tokens) else ()
    return Completion(text=msg.get("content") or "", reasoning=str(reasoning), logprobs=logprobs, token_ids=ids,
                      finish_reason=str(choice.get("finish_reason") or ""), generate_s=elapsed_s)
