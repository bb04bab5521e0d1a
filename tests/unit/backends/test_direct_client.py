"""The direct client of OpenAI-compatible servers (flipgate/backends/openai_http.py, issue #61):
which entries take it, that it sends what the litellm path sends and reads the same answers,
that a run on it never imports litellm, the order requests leave in, and the in-flight bound
shared by pytest-xdist workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.auditors import make_auditor
from support.paths import REPO
from support.zero_server import ZeroServer, message_key

from flipgate import FlipgateError
from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request
from flipgate.backends.slots import slots_dir_for
from flipgate.order.measure import order_cells
from flipgate.readouts import read_label

KEY = "sk-flipgate-direct-test-0a1b2c3d4e5f"


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("FLIPGATE_TEST_KEY", KEY)


def entry(api_base: str | None, model: str = "openai/served", **extra) -> dict:
    source = {"model": model, "api_key_env": "FLIPGATE_TEST_KEY", "revision": "r1"}
    if api_base:
        source["api_base"] = api_base
    return {"id": "api", "backend": "litellm", "readouts": ["regex"], "source": source, **extra}


@pytest.mark.parametrize(
    ("model", "api_base", "extra", "client"),
    [
        ("openai/served", "http://127.0.0.1:9/v1", {}, "direct"),
        ("hosted_vllm/Qwen/Qwen2.5-7B-Instruct", "http://127.0.0.1:9/v1", {}, "direct"),
        ("openai/served", "http://127.0.0.1:9/v1", {"client": "litellm"}, "litellm"),
        ("openai/gpt-4o-mini", None, {}, "litellm"),  # hosted OpenAI: litellm translates for it
        ("anthropic/claude-3-5-haiku-20241022", None, {}, "litellm"),
        ("huggingface/tgi", "http://127.0.0.1:9/v1", {}, "litellm"),
    ],
)
def test_openai_compatible_servers_take_the_direct_path(model, api_base, extra, client):
    assert LiteLLMBackend(entry(api_base, model, **extra)).client == client


def test_client_direct_is_refused_where_it_cannot_apply():
    with pytest.raises(FlipgateError, match=r"field client: 'direct' .*'anthropic/claude"):
        LiteLLMBackend(entry(None, "anthropic/claude-3-5-haiku-20241022", client="direct"))


class Recorder:
    """A chat server on 127.0.0.1 that records every request (headers, JSON body) and answers
    one fixed reply with log-probs and usage."""

    REPLY = {
        "id": "x",
        "object": "chat.completion",
        "model": "served",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Answer: C"},
                "logprobs": {
                    "content": [
                        {
                            "token": " C",
                            "logprob": -0.2,
                            "top_logprobs": [
                                {"token": " C", "logprob": -0.2},
                                {"token": " A", "logprob": -1.9},
                                {"token": "C", "logprob": -3.0},
                            ],
                        }
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": 31, "completion_tokens": 3, "total_tokens": 34},
    }

    def __init__(self) -> None:
        self.seen: list[tuple[dict, dict]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.seen.append((dict(self.headers), body))
                data = json.dumps(recorder.REPLY).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def recorder():
    server = Recorder()
    yield server
    server.stop()


#: what the two paths must agree on in every body (the OpenAI SDK litellm drives adds nothing a
#: served model reads)
SENT = ("model", "messages", "max_tokens", "temperature", "top_p", "logprobs", "top_logprobs")


def test_both_paths_send_the_same_request_and_read_the_same_answer(recorder):
    labels = ("A", "B", "C")
    requests = [
        Request(
            (("system", "Be brief."), ("user", f"Question {i}? A. x B. y C. z")),
            "Answer:",
            labels,
            seed=7 + i,
            key=("d", str(i), "f", 0, 0),
        )
        for i in range(3)
    ]
    settings = {
        "readouts": ["regex", "letter_logprob"],
        "capabilities": {"logprobs": True, "seed": True},
        "decoding": {"temperature": 0.7, "top_p": 0.9},
        "answer_prefill": True,
        "extra_body": {"top_k": 5, "chat_template_kwargs": {"enable_thinking": False}},
        "price": {"input_per_mtok": 2.0, "output_per_mtok": 8.0},
        "concurrency": 1,
    }
    runs = {}
    for client in ("direct", "litellm"):
        backend = LiteLLMBackend(entry(recorder.base_url, client=client, **settings))
        assert backend.client == client
        before = len(recorder.seen)
        outs = backend.complete(requests)
        runs[client] = (backend, outs, recorder.seen[before:])
        backend.close()
    (direct, d_outs, d_seen), (lite, l_outs, l_seen) = runs["direct"], runs["litellm"]
    assert direct.settings == lite.settings and direct.fingerprint == lite.fingerprint
    for (d_head, d_body), (l_head, l_body) in zip(d_seen, l_seen, strict=True):
        assert {k: d_body.get(k) for k in SENT} == {k: l_body.get(k) for k in SENT}
        assert d_body["model"] == "served" and d_body["messages"][-1] == {
            "role": "assistant",
            "content": "Answer:",
        }
        assert d_body["seed"] == l_body["seed"] and d_body["top_k"] == l_body["top_k"] == 5
        assert d_body["chat_template_kwargs"] == l_body["chat_template_kwargs"]
        assert d_head["Authorization"] == l_head["Authorization"] == f"Bearer {KEY}"
    assert [o.to_dict() | {"latency_s": 0} for o in d_outs] == [
        o.to_dict() | {"latency_s": 0} for o in l_outs
    ]
    assert [read_label("letter_logprob", o, labels, "Answer:") for o in d_outs] == ["C"] * 3
    assert d_outs[0].cost_usd == pytest.approx((31 * 2.0 + 3 * 8.0) / 1e6)


def test_a_run_on_the_direct_path_never_imports_litellm(recorder):
    """What makes a process start in well under a second: litellm's import alone is 2.7–4.4 s.
    The cost guard's price comes from litellm's bundled map, read without importing it."""
    script = f"""
import sys
from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request
from flipgate.cost import price_per_token
cfg = {json.dumps(entry(recorder.base_url))}
backend = LiteLLMBackend(cfg)
out = backend.complete([Request((("user", "Q? A. x B. y"),), "Answer:", ("A", "B"))])[0]
print(backend.client, out.text, price_per_token(cfg), "litellm" in sys.modules)
"""
    env = {**os.environ, "FLIPGATE_TEST_KEY": KEY}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["direct", "Answer:", "C", "None", "False"], proc.stdout


def test_one_items_orderings_and_replicates_leave_together(tmp_path):
    """The order suite hands the backend each item's K orderings (and its control's K
    replicates) together, and the backend sends them in that order: one request at a time, the
    server sees exactly the plan's order; with 4 in flight, every request arrives within 3 places
    of its item's run in the plan, so one item's requests reach a prefix cache together."""
    for concurrency in (1, 4):
        with ZeroServer() as server:
            backend = LiteLLMBackend(entry(server.base_url, concurrency=concurrency))
            backend.model_id = "scripted"
            auditor = make_auditor(tmp_path / str(concurrency), backend)
            for cell in ("option_order", "same_ordering:option_order"):
                server.reset()
                order_cells(auditor).trials("scripted", "arc_challenge", cell)
                _, requests = auditor.plans.cell_requests("arc_challenge", cell)
                planned = [message_key(r.messages[0][1]) for r in requests]
                items = [r.key[1] for r in requests]
                assert items == sorted(items, key=items.index)  # the plan: item after item
                arrived = server.stats()["order"]
                assert sorted(arrived) == sorted(planned)
                if concurrency == 1:
                    assert arrived == planned
                item_of = dict(zip(planned, items))
                run = {it: (items.index(it), len(items) - items[::-1].index(it)) for it in items}
                for i, key in enumerate(arrived):
                    first, end = run[item_of[key]]
                    assert first - concurrency < i < end + concurrency - 1, (cell, i, key)
            backend.close()


def test_a_backend_collected_inside_another_event_loop_closes_its_connections(recorder):
    """The garbage collector may drop a backend while some other event loop runs in the thread:
    its connections still close (no "Unclosed client session" at exit)."""
    import asyncio
    import gc
    import warnings

    backend = LiteLLMBackend(entry(recorder.base_url))
    backend.complete([Request((("user", "Q? A. x B. y"),), "Answer:", ("A", "B"))])
    session = backend._loop.direct.session  # type: ignore[union-attr]
    holder = [backend]
    del backend

    async def elsewhere() -> None:
        holder.clear()
        gc.collect()

    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        asyncio.run(elsewhere())
    assert session.closed


XDIST_CALLS = """
import os

from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request


def test_calls():
    worker = os.environ["PYTEST_XDIST_WORKER"]
    source = {"model": "openai/bench", "api_base": os.environ["ZERO_URL"], "revision": "r1"}
    backend = LiteLLMBackend(
        {"id": "api", "backend": "litellm", "source": source, "concurrency": 4}
    )
    requests = [Request((("user", f"{worker} question {i}"),)) for i in range(48)]
    assert len(backend.complete(requests)) == 48
    backend.close()
"""


@pytest.mark.slow
def test_two_xdist_workers_together_keep_no_more_in_flight_than_declared(tmp_path):
    """``concurrency`` is the entry's bound for the whole run: two pytest-xdist workers calling
    one endpoint at once keep at most 4 requests in the air between them (each kept 4 before),
    and the bound is reached; both workers are served, and the folder they shared the bound
    through is gone when the run ends."""
    (tmp_path / "test_calls.py").write_text(XDIST_CALLS)
    uid = f"flipgate-test-{os.getpid()}-{tmp_path.name}"
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "each", "--testrunuid",
               uid, "-p", "no:cacheprovider", "test_calls.py"]  # fmt: skip
    with ZeroServer(latency_s=0.05) as server:
        proc = subprocess.run(
            command,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "ZERO_URL": server.base_url},
        )
        stats = server.stats()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout
    assert stats["requests"] == 96 and stats["max_in_flight"] == 4, stats["max_in_flight"]
    assert not slots_dir_for(uid).exists()


def test_a_client_that_is_not_one_of_the_two_is_one_line_naming_file_field_and_value(tmp_path):
    from flipgate import registry
    from flipgate.config import load_models

    registry.suites()
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n  - id: m\n    backend: litellm\n    source: {model: openai/x, api_base: "
        '"http://127.0.0.1:9/v1", revision: r}\n    client: fast\n'
    )
    with pytest.raises(FlipgateError) as err:
        load_models(models)
    assert str(err.value) == (
        f"{models}: field models[0].client: 'fast' is not one of ['direct', 'litellm'] "
        "(value: 'fast')"
    )
