"""The openai backend against a real loopback chat-completions server."""

from __future__ import annotations

import time

import pytest

from agent.openai_backend import OpenAIError, OpenAIPolicy
from agent.backends import make_policy
from agent.policy import SamplingConfig
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
    # The usage block: prompt tokens of the messages, completion tokens of answer + reasoning.
    assert (c.prompt_tokens, c.completion_tokens, c.reasoning_tokens) == (1 + 4, 2 + 4, 4)
    body = srv.requests[0]
    assert body["model"] == "my-model" and body["messages"] == CONV
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.7, 0.95, 123, 9)
    assert srv.headers[0]["authorization"] == "Bearer sk-test-123"


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
    assert "authorization" not in srv.headers[0]


def test_per_prompt_seeds_go_with_their_own_requests():
    with ChatServer(lambda body: {"content": body["messages"][-1]["content"]}) as srv:
        convs = [[{"role": "user", "content": str(i)}] for i in range(3)]
        OpenAIPolicy(srv.base_url, "m", api_key="").generate(convs, SamplingConfig(seed=1, seeds=(70, 5, 900)))
    assert {r["messages"][-1]["content"]: r["seed"] for r in srv.requests} == {"0": 70, "1": 5, "2": 900}


def test_retries_rate_limits_and_server_errors_then_succeeds():
    # The server says how long to wait (retry-after-ms), as rate-limited APIs do; the client obeys it.
    script = [{"status": 429, "error": "slow down", "retry_after_ms": 20}, {"status": 503, "retry_after_ms": 20},
              {"status": 500, "retry_after_ms": 20}, "finally"]
    with ChatServer(script) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="")
        t0 = time.perf_counter()
        [c] = policy.generate([CONV], SamplingConfig())
    assert c.text == "finally" and len(srv.requests) == 4
    assert time.perf_counter() - t0 < 3.0                        # 20 ms waits, not the default back-off


def test_usage_given_by_the_server_is_kept_and_missing_usage_is_zero():
    script = [{"content": "a", "usage": {"prompt_tokens": 1200, "completion_tokens": 345, "total_tokens": 1545,
                                         "completion_tokens_details": {"reasoning_tokens": 300}}},
              {"content": "b", "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}]
    with ChatServer(script) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="", concurrency=1)
        first, second = policy.generate([CONV, CONV], SamplingConfig())
    assert (first.prompt_tokens, first.completion_tokens, first.reasoning_tokens) == (1200, 345, 300)
    assert (second.prompt_tokens, second.completion_tokens, second.reasoning_tokens) == (7, 3, 0)


def test_requests_run_concurrently():
    """Eight conversations against a server that holds each reply 0.3 s: in parallel they take about 0.3 s."""
    def slow(body):
        time.sleep(0.3)
        return "ok"

    with ChatServer(slow) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="", concurrency=8)
        t0 = time.perf_counter()
        out = policy.generate([CONV] * 8, SamplingConfig())
        elapsed = time.perf_counter() - t0
    assert [c.text for c in out] == ["ok"] * 8 and elapsed < 1.5


def test_timeout_is_retried_then_reported():
    def stall(body):
        time.sleep(1.0)
        return "late"

    with ChatServer(stall) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="", timeout_s=0.2, max_retries=0)
        with pytest.raises(OpenAIError, match="after 1 attempts.*Timeout"):
            policy.generate([CONV], SamplingConfig())


def test_client_error_is_not_retried_and_names_the_reason():
    with ChatServer([{"status": 400, "error": "max_tokens is too large"}, "never"]) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="")
        with pytest.raises(OpenAIError, match="400.*max_tokens is too large"):
            policy.generate([CONV], SamplingConfig())
    assert len(srv.requests) == 1


def test_gives_up_after_max_retries():
    with ChatServer([{"status": 502, "error": "bad gateway", "retry_after_ms": 10}]) as srv:
        policy = OpenAIPolicy(srv.base_url, "m", api_key="", max_retries=2)
        with pytest.raises(OpenAIError, match="after 3 attempts.*502"):
            policy.generate([CONV], SamplingConfig())
    assert len(srv.requests) == 3


def test_unreachable_server_is_an_error_not_a_hang():
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "m", api_key="", max_retries=1, timeout_s=5)
    with pytest.raises(OpenAIError, match="ConnectionError"):
        policy.generate([CONV], SamplingConfig())


def test_streamed_answers_come_back_whole_with_usage():
    def script(body):
        n = body["messages"][-1]["content"]
        return {"content": f"streamed reply to {n}, long enough to span chunks", "reasoning_content": f"think {n}",
                "logprobs": [-0.25, -0.5]}

    convs = [[{"role": "user", "content": str(i)}] for i in range(3)]
    with ChatServer(script) as srv:
        streamed = OpenAIPolicy(srv.base_url, "m", api_key="", stream=True).generate(convs, SamplingConfig())
        whole = OpenAIPolicy(srv.base_url, "m", api_key="").generate(convs, SamplingConfig())
    assert all(r["stream"] and r["stream_options"] == {"include_usage": True} for r in srv.requests[:3])
    for s, w in zip(streamed, whole):
        assert (s.text, s.reasoning, s.logprobs, s.finish_reason) == (w.text, w.reasoning, w.logprobs, w.finish_reason)
        assert (s.prompt_tokens, s.completion_tokens, s.reasoning_tokens) == (
            w.prompt_tokens, w.completion_tokens, w.reasoning_tokens) != (0, 0, 0)
    assert streamed[2].text.startswith("streamed reply to 2") and streamed[2].reasoning == "think 2"
