"""Test support: a small OpenAI-compatible chat-completions server for any flipgate model
(loopback use; the tests and benchmarks/api_concurrency.py, not a user's run, which has real
servers: docs/servers.md).

It serves a local backend (e.g. the embedded SmolLM2) at ``/v1/chat/completions`` so the
``litellm`` backend can be exercised end to end without a provider, batches concurrent requests
(dynamic batching, like vLLM) and can inject faults: 429 with Retry-After, 500, slow replies,
malformed JSON, and a hard failure after N answers (to test resume).

The assistant turn is prefilled with ``--prefill`` ("Answer:" by default) and the reply's content is
that prefill plus the continuation. With ``logprobs: true`` the reply carries one logprobs entry:
the first generated position, its ``top_logprobs`` restricted to the letters A–Z.

The API key is checked (401) before the body is parsed; a body that is not a JSON object with a
``messages`` list is answered 400 (``invalid_request_error``), any other failure 500, each with a
JSON error body and never a traceback.
"""

from __future__ import annotations

import base64
import json
import queue
import random
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from flipgate.backends.base import Backend, Output, Request
from flipgate.items.item import LETTERS


@dataclass
class Faults:
    """Fault injection: each request draws one outcome from a seeded RNG (probabilities);
    ``fail_after`` answers every request after that many admitted answers with 500."""

    rate_limit: float = 0.0
    server_error: float = 0.0
    slow: float = 0.0
    malformed: float = 0.0
    retry_after_s: float = 1.0
    slow_s: float = 2.0
    fail_after: int | None = None
    seed: int = 0
    _rng: random.Random = field(default=None, repr=False)  # type: ignore[assignment]

    def __post_init__(self):
        self._rng = random.Random(self.seed)

    def draw(self) -> str:
        u = self._rng.random()
        for name in ("rate_limit", "server_error", "slow", "malformed"):
            p = getattr(self, name)
            if u < p:
                return name
            u -= p
        return "ok"


class Batcher:
    """Collects requests arriving within ``window_s`` (up to ``max_batch``) into one backend
    call."""

    def __init__(self, backend: Backend, max_batch: int = 16, window_s: float = 0.01):
        self.backend, self.max_batch, self.window_s = backend, max_batch, window_s
        self.queue: queue.Queue[tuple[Request, Future]] = queue.Queue()
        self.batches: list[int] = []  # sizes of the batches run
        threading.Thread(target=self._loop, daemon=True).start()

    def submit(self, request: Request) -> Output:
        future: Future = Future()
        self.queue.put((request, future))
        return future.result()

    def _loop(self) -> None:
        while True:
            pending = [self.queue.get()]
            deadline = time.monotonic() + self.window_s
            while len(pending) < self.max_batch:
                try:
                    pending.append(self.queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            self.batches.append(len(pending))
            try:
                outputs = self.backend.complete([r for r, _ in pending])
                for (_, future), out in zip(pending, outputs):
                    future.set_result(out)
            except Exception as exc:  # hand the failure to every waiting handler
                for _, future in pending:
                    future.set_exception(exc)


#: the largest request body read (data-URL images included)
MAX_BODY_BYTES = 64 * 2**20


def parse_body(raw: bytes) -> dict[str, Any]:
    """An OpenAI chat body: a JSON object with a non-empty ``messages`` list; ValueError
    otherwise."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the body is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("field 'messages' (a non-empty list of {role, content}) is required")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise ValueError("each entry of 'messages' must be an object with a string 'role'")
    return body


def request_from_body(body: dict[str, Any], prefill: str) -> Request:
    """A backend request from an OpenAI chat body (text and data-URL image parts)."""
    messages, images = [], []
    for m in body["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            text = ""
            for part in content:
                if part.get("type") == "text":
                    text += part["text"]
                elif part.get("type") == "image_url":
                    url = (
                        part["image_url"]["url"]
                        if isinstance(part["image_url"], dict)
                        else part["image_url"]
                    )
                    images.append(base64.b64decode(url.split(",", 1)[1]))
                    text += "<image>"
            content = text
        messages.append((m["role"], content or ""))
    labels = tuple(LETTERS) if body.get("logprobs") else ()
    return Request(
        tuple(messages),
        prefill,
        labels,
        int(body.get("seed") or 0),
        (),
        body.get("max_tokens") or body.get("max_completion_tokens"),
        tuple(images),
    )


def completion_body(
    out: Output, model: str, prefill: str, want_logprobs: bool, top_n: int
) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": prefill + out.text},
    }
    if want_logprobs and out.label_logprobs:
        top = sorted(out.label_logprobs.items(), key=lambda kv: -kv[1])[: max(1, top_n)]
        choice["logprobs"] = {
            "content": [
                {
                    "token": " " + top[0][0],
                    "logprob": top[0][1],
                    "bytes": None,
                    "top_logprobs": [
                        {"token": " " + k, "logprob": v, "bytes": None} for k, v in top
                    ],
                }
            ]
        }
    return {
        "id": f"chatcmpl-{random.getrandbits(48):x}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "flipgate-serve",
        "choices": [choice],
        "usage": {
            "prompt_tokens": out.tokens_in,
            "completion_tokens": out.tokens_out,
            "total_tokens": out.tokens_in + out.tokens_out,
        },
    }


class LoopbackServer:
    """Threaded HTTP server around a :class:`Batcher`; ``start()`` returns the ``/v1`` base URL."""

    def __init__(
        self,
        backend: Backend,
        host: str = "127.0.0.1",
        port: int = 0,
        prefill: str = "Answer:",
        api_key: str | None = None,
        faults: Faults | None = None,
        max_batch: int = 16,
        window_s: float = 0.01,
    ):
        self.backend, self.prefill, self.api_key = backend, prefill, api_key
        self.faults = faults or Faults()
        self.batcher = Batcher(backend, max_batch, window_s)
        self.counts: dict[str, int] = {
            "requests": 0,
            "ok": 0,
            "rate_limit": 0,
            "server_error": 0,
            "slow": 0,
            "malformed": 0,
            "unauthorized": 0,
            "failed_after": 0,
            "bad_request": 0,
            "internal_error": 0,
        }
        self._lock = threading.Lock()
        self._admitted = 0  # requests let through to the model (for ``fail_after``)
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server's address (typeshed also allows bytes)
        return f"http://{host}:{port}/v1"

    def start(self) -> str:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self.base_url

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _count(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    def _outcome(self) -> str:
        with self._lock:
            self.counts["requests"] += 1
            limit = self.faults.fail_after
            if limit is not None and self._admitted >= limit:
                return "failed_after"
            outcome = self.faults.draw()
            self._admitted += outcome in ("ok", "slow")
            return outcome

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: tests and benchmarks read counts instead
                pass

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (
                    BrokenPipeError,
                    ConnectionResetError,
                ):  # the client gave up (e.g. its timeout)
                    self.close_connection = True

            def _error(self, status: int, message: str, kind: str, headers=None):
                self._send(
                    status,
                    json.dumps({"error": {"message": message, "type": kind}}).encode(),
                    headers,
                )

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(
                        200,
                        json.dumps(
                            {
                                "object": "list",
                                "data": [{"id": server.backend.model_id, "object": "model"}],
                            }
                        ).encode(),
                    )
                else:
                    self._error(404, f"no route {self.path}", "not_found")

            def _read_body(self) -> bytes | None:
                """The raw body (read, not parsed), or None when Content-Length is not a usable
                size."""
                try:
                    size = int(self.headers.get("Content-Length", 0))
                except ValueError:
                    return None
                if not 0 <= size <= MAX_BODY_BYTES:
                    return None
                return self.rfile.read(size)

            def do_POST(self):
                try:
                    self._post()
                except Exception as exc:  # never a traceback: a JSON 500 names what went wrong
                    server._count("internal_error")
                    self._error(
                        500, f"internal error: {type(exc).__name__}: {exc}"[:500], "server_error"
                    )

            def _post(self):
                raw = (
                    self._read_body()
                )  # drained before any reply, parsed only once the caller is authorised
                if raw is None:
                    self.close_connection = True
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._error(404, f"no route {self.path}", "not_found")
                if (
                    server.api_key
                    and self.headers.get("Authorization") != f"Bearer {server.api_key}"
                ):
                    server._count("unauthorized")
                    return self._error(401, "invalid API key", "authentication_error")
                try:
                    if raw is None:
                        raise ValueError("missing or invalid Content-Length")
                    body = parse_body(raw)
                    request = request_from_body(body, server.prefill)
                except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                    server._count("bad_request")
                    why = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError) else str(exc)
                    return self._error(400, f"bad request: {why}"[:500], "invalid_request_error")
                outcome = server._outcome()
                if outcome != "ok" and outcome != "slow":
                    server._count(outcome)
                if outcome == "rate_limit":
                    return self._error(
                        429,
                        "rate limited (injected)",
                        "rate_limit_error",
                        {"Retry-After": f"{server.faults.retry_after_s:g}"},
                    )
                if outcome in ("server_error", "failed_after"):
                    return self._error(500, f"internal error (injected: {outcome})", "server_error")
                if outcome == "malformed":
                    return self._send(200, b'{"id": "chatcmpl-x", "choices": [{"message": ')
                if outcome == "slow":
                    server._count("slow")
                    time.sleep(server.faults.slow_s)
                out = server.batcher.submit(request)
                server._count("ok")
                self._send(
                    200,
                    json.dumps(
                        completion_body(
                            out,
                            body.get("model", ""),
                            server.prefill,
                            bool(body.get("logprobs")),
                            int(body.get("top_logprobs") or 1),
                        )
                    ).encode(),
                )

        return Handler
