"""A real HTTP server on loopback speaking the chat-completions protocol, with scripted answers.

Tests start it, point the openai backend (or `kernel-agent optimize --base-url`) at it, and read back
the requests it received. Each script entry is either a string (the answer's content), a dict with
`content` and optionally `reasoning_content`, `reasoning`, `logprobs` (list of floats), `usage` (the
reply's usage block; by default counted as `usage_of` does), `status` (an HTTP error status to answer
with instead), `error` (its message) and `retry_after_ms` (a `retry-after-ms` header on that error), or
a callable taking the request body and returning one of those. A request with `stream: true` gets the
same reply as server-sent chunks (with the usage block last when `stream_options.include_usage`). Entries are served in arrival order; when the script runs
out, the last entry repeats.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Script = list[Any]


class ChatServer:
    """`with ChatServer(script) as srv: ... srv.base_url ... srv.requests`."""

    def __init__(self, script: Script | Callable[[dict], Any]):
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        """Request headers, names lower-cased."""
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "ChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict) -> Any:
        with self._lock:
            n = len(self.requests)
            self.requests.append(body)
            if not callable(self.script):
                return self.script[min(n, len(self.script) - 1)]
        return self.script(body)  # outside the lock: a slow script must not serialise concurrent requests

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    return self._send(400, {"error": {"message": "body is not JSON"}})
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                with server._lock:
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                entry = server._next(body)
                if isinstance(entry, str):
                    entry = {"content": entry}
                if entry.get("status", 200) != 200:
                    headers = {"retry-after-ms": str(entry["retry_after_ms"])} if "retry_after_ms" in entry else {}
                    return self._send(entry["status"], {"error": {"message": entry.get("error", "scripted error")}},
                                      headers)
                reply = _reply(body, entry, len(server.requests))
                if body.get("stream"):
                    return self._stream(reply, bool((body.get("stream_options") or {}).get("include_usage")))
                self._send(200, reply)

            def _stream(self, reply: dict, include_usage: bool) -> None:
                """The reply as server-sent `chat.completion.chunk` events, a few characters each."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                choice, base = reply["choices"][0], {k: reply[k] for k in ("id", "created", "model")}
                msg, lps = choice["message"], (choice.get("logprobs") or {}).get("content") or []
                events = []
                for key in ("reasoning_content", "reasoning", "content"):
                    text = msg.get(key) or ""
                    events += [{key: text[i:i + 7]} for i in range(0, len(text), 7)]
                for i, delta in enumerate(events or [{"content": ""}]):
                    c = {"index": 0, "delta": delta, "finish_reason": None}
                    if i == 0 and lps:
                        c["logprobs"] = {"content": lps}
                    self._event({**base, "object": "chat.completion.chunk", "choices": [c]})
                self._event({**base, "object": "chat.completion.chunk",
                             "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
                if include_usage:
                    self._event({**base, "object": "chat.completion.chunk", "choices": [], "usage": reply["usage"]})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _event(self, payload: dict) -> None:
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
                self.wfile.flush()

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _reply(body: dict, entry: dict, serial: int) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": entry.get("content", "")}
    for key in ("reasoning_content", "reasoning"):
        if key in entry:
            message[key] = entry[key]
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": entry.get("finish_reason", "stop")}
    if "logprobs" in entry:
        choice["logprobs"] = {"content": [{"token": f"t{i}", "logprob": lp} for i, lp in enumerate(entry["logprobs"])]}
    usage = entry.get("usage") or usage_of(body, entry)
    return {"id": f"chatcmpl-{serial}", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [choice], "usage": usage}


def usage_of(body: dict, entry: dict) -> dict:
    """The usage block a server would send, counted at 4 characters a token (tests recompute it the same way):
    prompt tokens from the messages, completion tokens from the answer and its reasoning, the reasoning
    tokens reported apart as OpenAI's `completion_tokens_details.reasoning_tokens`."""
    prompt = sum(_tokens(m.get("content", "")) for m in body.get("messages", []))
    reasoning = _tokens(entry.get("reasoning_content", "") or entry.get("reasoning", ""))
    completion = _tokens(entry.get("content", "")) + reasoning
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "completion_tokens_details": {"reasoning_tokens": reasoning}}


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4
