"""The openai backend against a real loopback chat-completions server."""

from __future__ import annotations

import pytest

from agent.openai_backend import OpenAIError, OpenAIPolicy
from agent.policy import SamplingConfig, make_policy
from tests.chat_server import ChatServer

CONV = [{"role": "system", "content": "s"}, {"role": "user", "content": "write a kernel"}]


def test_sends_sampling_settings_and_key_and_reads_reasoning(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    script = [{"content": "answer", "reasoning_content": "private thoughts", "logprobs": [-0.5, -1.5]}]
    with ChatServer(script) as srv:
        policy = make_policy("openai", "my-model", base_url=srv.base_url)
        [c] = policy.generate([CONV], SamplingConfig(temperature=0.7, top_p=0.95, max_tokens=123, seed=9))
    assert c.text == "answer" and c.reasoning == "private thoughts"
    assert c.logprobs == (-0.5, -1.5) and c.finish_reason == "stop"
    body = srv.requests[0]
    assert body["model"] == "my-model" and body["messages"] == CONV
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.7, 0.95, 123, 9)
    assert srv.headers[0]["Authorization"] == "Bearer sk-test-123"


def test_reasoning_field_variant_and_batch_order():
    def script(body):
        n = body["messages"][-1]["content"]
        return {"content": f"reply to {n}", "reasoning": f"thinking about {n}"}

    with ChatServer(script) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="")
        convs = [[{"role": "user", "content": str(i)}] for i in range(7)]
        out = policy.generate(convs, SamplingConfig(seed=100))
    assert [c.text for c in out] == [f"reply to {i}" for i in range(7)]
    assert out[3].reasoning == "thinking about 3"
    assert sorted(r["seed"] for r in srv.requests) == list(range(100, 107))
    assert "Authorization" not in srv.headers[0]


def test_retries_rate_limits_and_server_errors_then_succeeds():
    script = [{"status": 429, "error": "slow down"}, {"status": 503}, {"status": 500}, "finally"]
    with ChatServer(script) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="", backoff_s=0.01)
        [c] = policy.generate([CONV], SamplingConfig())
    assert c.text == "finally" and len(srv.requests) == 4


def test_client_error_is_not_retried_and_names_the_reason():
    with ChatServer([{"status": 400, "error": "max_tokens is too large"}, "never"]) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="", backoff_s=0.01)
        with pytest.raises(OpenAIError, match="400.*max_tokens is too large"):
            policy.generate([CONV], SamplingConfig())
    assert len(srv.requests) == 1


def test_gives_up_after_max_retries():
    with ChatServer([{"status": 502, "error": "bad gateway"}]) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="", backoff_s=0.001, max_retries=2)
        with pytest.raises(OpenAIError, match="after 3 attempts.*502"):
            policy.generate([CONV], SamplingConfig())
    assert len(srv.requests) == 3


def test_unreachable_server_is_an_error_not_a_hang():
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "m", api_key="", backoff_s=0.001, max_retries=1, timeout_s=5)
    with pytest.raises(OpenAIError, match="ConnectionError"):
        policy.generate([CONV], SamplingConfig())
