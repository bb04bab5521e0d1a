"""Test support: a zero-work OpenAI-compatible server, for measuring what a client costs
(benchmarks/client_overhead.py) and for tests that need a server that answers at once.

It runs in its own process (``python zero_server.py``, started by :class:`ZeroServer`), so its
CPU is not the client's: aiohttp on 127.0.0.1 at a free port, which it reports on its first line
of stdout (``PORT <n>``). ``POST /v1/chat/completions`` parses the request's JSON (as a real
server does) and answers a precomputed body: one choice "Answer: B", usage 50 prompt and 3
completion tokens, and with ``"logprobs": true`` one logprobs position (token " B") whose
``top_logprobs`` are " B", " A", " C", " D" then filler tokens, as many as ``top_logprobs`` asks
(at most 20). ``GET /v1/models`` lists the model; ``GET /props`` is 404 (flipgate's identity
probe: no llama.cpp). ``latency_s`` adds an ``asyncio.sleep`` to every completion.

``GET /stats`` says what was served since the start or the last ``POST /stats/reset``: requests,
the most in flight at once, the arrival order of the requests (:func:`message_key` of each one's
first user message), the wall (``time.time``) and monotonic time of the first completion request,
the identity probes, and the server process's CPU seconds. The server ends on SIGTERM or when its
stdin closes (its parent ended).

    with ZeroServer(latency_s=0.1) as server:
        ...  # calls to server.base_url (".../v1")
        server.stats()["max_in_flight"]
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

MODEL = "bench"
#: the top log-probs the reply's one position carries, best first: the letters, then fillers
TOP = [(" B", -0.05), (" A", -3.2), (" C", -4.1), (" D", -4.6)] + [
    (f" t{i}", -6.0 - 0.25 * i) for i in range(16)
]


def message_key(content: Any) -> str:
    """The key :class:`ZeroServer` records for a request: a short hash of its first user message
    (text, or the JSON of a list of content parts)."""
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def reply_bodies(model: str) -> tuple[bytes, list[bytes]]:
    """(the reply without logprobs, the replies with logprobs by ``top_logprobs`` 0..20)."""

    def body(logprobs: dict | None) -> bytes:
        return json.dumps(
            {
                "id": "chatcmpl-zero",
                "object": "chat.completion",
                "created": 1700000000,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Answer: B"},
                        "logprobs": logprobs,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53},
            }
        ).encode()

    def position(k: int) -> dict:
        top = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in TOP[:k]]
        return {
            "content": [{"token": " B", "logprob": -0.05, "bytes": [32, 66], "top_logprobs": top}]
        }

    return body(None), [body(position(k)) for k in range(21)]


async def serve(latency_s: float, model: str) -> None:
    from aiohttp import web

    plain, with_logprobs = reply_bodies(model)
    models = json.dumps(
        {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "zero"}]}
    ).encode()
    stats: dict[str, Any] = {}
    in_flight = [0]

    def reset() -> None:
        stats.update(
            requests=0,
            max_in_flight=0,
            order=[],
            first_request_wall=None,
            first_request_monotonic=None,
            probes={"models": 0, "props": 0},
        )

    reset()

    async def completions(request: web.Request) -> web.Response:
        if stats["first_request_wall"] is None:
            stats["first_request_wall"] = time.time()
            stats["first_request_monotonic"] = time.monotonic()
        stats["requests"] += 1
        in_flight[0] += 1
        stats["max_in_flight"] = max(stats["max_in_flight"], in_flight[0])
        try:
            try:
                body = json.loads(await request.read())
                first = next(m["content"] for m in body["messages"] if m.get("role") == "user")
            except (ValueError, KeyError, TypeError, StopIteration):
                return web.json_response(
                    {"error": {"message": "bad request", "type": "invalid_request_error"}},
                    status=400,
                )
            stats["order"].append(message_key(first))
            if latency_s > 0:
                await asyncio.sleep(latency_s)
            if body.get("logprobs"):
                k = max(0, min(int(body.get("top_logprobs") or 0), 20))
                reply = with_logprobs[k]
            else:
                reply = plain
            return web.Response(body=reply, content_type="application/json")
        finally:
            in_flight[0] -= 1

    async def list_models(request: web.Request) -> web.Response:
        stats["probes"]["models"] += 1
        return web.Response(body=models, content_type="application/json")

    async def props(request: web.Request) -> web.Response:
        stats["probes"]["props"] += 1
        raise web.HTTPNotFound()

    async def get_stats(request: web.Request) -> web.Response:
        return web.json_response({**stats, "in_flight": in_flight[0], "cpu_s": time.process_time()})

    async def post_reset(request: web.Request) -> web.Response:
        reset()
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes(
        [
            web.post("/v1/chat/completions", completions),
            web.get("/v1/models", list_models),
            web.get("/props", props),
            web.get("/stats", get_stats),
            web.post("/stats/reset", post_reset),
        ]
    )
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def on_stdin() -> None:  # the parent closed our stdin (stop() or it ended): stop
        if not os.read(0, 4096):
            loop.remove_reader(0)
            stop.set()

    loop.add_reader(0, on_stdin)
    print(f"PORT {port}", flush=True)
    await stop.wait()
    await runner.cleanup()


class ZeroServer:
    """A zero-work server in a child process: :meth:`start` (or ``with``) starts it,
    :attr:`base_url` is its OpenAI root (``http://127.0.0.1:<port>/v1``), :meth:`stats` and
    :meth:`reset` read and clear its counters, :meth:`stop` ends it."""

    def __init__(self, latency_s: float = 0.0, model: str = MODEL):
        self.latency_s, self.model = float(latency_s), model
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def start(self) -> ZeroServer:
        cmd = [sys.executable, "-P", str(Path(__file__).resolve())]
        cmd += ["--latency-s", repr(self.latency_s), "--model", self.model]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the zero server did not start (it said {line!r})")
        self.port = int(line.split()[1])
        return self

    def _call(self, method: str, path: str) -> Any:
        req = urllib.request.Request(
            self.root + path, method=method, data=b"" if method == "POST" else None
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict[str, Any]:
        """requests, max_in_flight, in_flight, order (:func:`message_key` of each request, in
        arrival order), first_request_wall, first_request_monotonic (None before one), probes
        ({"models": n, "props": n}) and cpu_s (the server process's CPU seconds, never reset)."""
        return self._call("GET", "/stats")

    def reset(self) -> None:
        """Clear the counters (all but cpu_s)."""
        self._call("POST", "/stats/reset")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> ZeroServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="zero-work OpenAI-compatible server")
    ap.add_argument("--latency-s", type=float, default=0.0)
    ap.add_argument("--model", default=MODEL)
    args = ap.parse_args()
    asyncio.run(serve(args.latency_s, args.model))
