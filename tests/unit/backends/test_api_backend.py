"""litellm backend against a real OpenAI-compatible server on 127.0.0.1
(tests/support/loopback_server.py), with faults."""

from __future__ import annotations

import http.server
import math
import threading
import time

import pytest
from support.loopback_server import Faults, LoopbackServer
from support.paths import REPO
from support.scripted import ScriptedBackend

from flipgate import FlipgateError
from flipgate.backends.api import LiteLLMBackend, content_parts, label_logprobs, retry_after_s
from flipgate.backends.base import Request
from flipgate.items import DatasetSpec
from flipgate.order.measure import order_cells
from flipgate.readouts import read_label
from flipgate.summary import facet_summary

KEY = "sk-flipgate-test-5f1c0ffee0ddba11"


def api_model(server: LoopbackServer, **extra) -> dict:
    return {
        "id": "api",
        "backend": "litellm",
        "readouts": ["regex"],
        "concurrency": 8,
        "source": {
            "model": "openai/scripted",
            "api_base": server.base_url,
            "api_key_env": "FLIPGATE_TEST_KEY",
        },
        "retries": {"max_attempts": 8, "base_delay_s": 0.01, "max_delay_s": 0.2},
        **extra,
    }


def mcq(i: int, images: tuple[bytes, ...] = ()) -> Request:
    figure = "<image>" * len(images)
    return Request(
        (("user", f"{figure}Question {i}? A. x B. y C. z"),),
        "Answer:",
        ("A", "B", "C"),
        key=("d", str(i), "f", 0, 0),
        images=images,
    )


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("FLIPGATE_TEST_KEY", KEY)


def test_retry_after_seconds_and_http_date():
    class Exc(Exception):
        litellm_response_headers = {"retry-after": "7"}

    assert retry_after_s(Exc()) == 7.0
    Exc.litellm_response_headers = {
        "retry-after": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    }
    assert 28 <= retry_after_s(Exc()) <= 31
    assert retry_after_s(Exception()) is None


def test_label_logprobs_first_label_position_sums_spellings():
    logprobs = {
        "content": [
            {
                "token": "Answer",
                "logprob": -0.01,
                "top_logprobs": [{"token": "B", "logprob": -5.0}],
            },
            {
                "token": " B",
                "logprob": -0.1,
                "top_logprobs": [
                    {"token": " B", "logprob": -0.1},
                    {"token": "B", "logprob": -2.0},
                    {"token": " C", "logprob": -3.0},
                    {"token": " the", "logprob": -4},
                ],
            },
        ]
    }
    got = label_logprobs(logprobs, ("A", "B", "C"))
    assert got == {"B": pytest.approx(math.log(math.exp(-0.1) + math.exp(-2.0))), "C": -3.0}
    assert label_logprobs(None, ("A",)) == {} and label_logprobs(logprobs, ()) == {}
    # no sampled token is a label: the first position with a label among its alternatives
    assert label_logprobs(
        {
            "content": [
                {
                    "token": " Q",
                    "top_logprobs": [
                        {"token": " Q", "logprob": -0.5},
                        {"token": " A", "logprob": -1.5},
                    ],
                }
            ]
        },
        ("A", "B"),
    ) == {"A": -1.5}


def test_content_parts_places_images_at_placeholders():
    png, jpg = b"\x89PNG....", b"\xff\xd8\xff...."
    parts = content_parts("see <image> and <image>.", (png, jpg))
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url", "text"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[3]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert content_parts("plain", ()) == "plain"


def test_answers_usage_logprobs_and_images_through_the_server(serve):
    seen = []
    server = serve(ScriptedBackend(rule=lambda r: seen.append(r) or "B"), api_key=KEY)
    backend = LiteLLMBackend(
        api_model(
            server,
            readouts=["regex", "letter_logprob"],
            capabilities={"logprobs": True, "images": True},
        )
    )
    outs = backend.complete([mcq(0), mcq(1, images=(b"\x89PNGdata",))])
    assert [read_label("regex", o, ("A", "B", "C"), "Answer:") for o in outs] == ["B", "B"]
    assert [read_label("letter_logprob", o, ("A", "B", "C"), "Answer:") for o in outs] == ["B", "B"]
    assert outs[0].tokens_in == 10 and outs[0].tokens_out == 2 and backend.supports_images
    assert sorted(r.images for r in seen) == [
        (),
        (b"\x89PNGdata",),
    ]  # the image travelled as a data URL


def test_provider_quirks_unsupported_params_are_never_sent(serve):
    server = serve(ScriptedBackend(), api_key=KEY)
    backend = LiteLLMBackend(
        api_model(
            server,
            decoding={"temperature": 0.7, "top_p": 0.9},
            unsupported_params=["temperature"],
            capabilities={"seed": True},
        )
    )
    kw = backend.kwargs(mcq(0))
    assert "temperature" not in kw and kw["top_p"] == 0.9 and "logprobs" not in kw
    assert "seed" in kw  # seeded providers get the per-call seed when sampling
    assert backend.settings["decoding"] == {
        "top_p": 0.9
    }  # what was sent is what is keyed and carded


def test_letter_logprob_without_capability_is_a_config_error():
    with pytest.raises(FlipgateError, match="capabilities.logprobs"):
        LiteLLMBackend(
            {
                "id": "x",
                "backend": "litellm",
                "source": {"model": "openai/x"},
                "readouts": ["letter_logprob"],
            }
        )


def test_missing_key_variable_is_named(monkeypatch):
    monkeypatch.delenv("FLIPGATE_TEST_KEY")
    with pytest.raises(FlipgateError, match="environment variable 'FLIPGATE_TEST_KEY'"):
        LiteLLMBackend(
            {
                "id": "x",
                "backend": "litellm",
                "source": {"model": "openai/x", "api_key_env": "FLIPGATE_TEST_KEY"},
            }
        )


def test_faults_are_retried_until_every_answer_arrives(serve):
    faults = Faults(
        rate_limit=0.25,
        server_error=0.15,
        slow=0.1,
        malformed=0.1,
        retry_after_s=0.05,
        slow_s=0.3,
        seed=3,
    )
    server = serve(ScriptedBackend(rule=lambda r: "C"), api_key=KEY, faults=faults)
    # half the attempts fail, drawn in arrival order: with 8 attempts one of the 40 requests
    # ran out about once in seven runs (seen in CI); 30 make that ~4e-8
    retries = {"max_attempts": 30, "base_delay_s": 0.01, "max_delay_s": 0.2}
    backend = LiteLLMBackend(api_model(server, timeout_s=5, retries=retries))
    outs = backend.complete([mcq(i) for i in range(40)])
    assert [read_label("regex", o, ("A", "B", "C"), "Answer:") for o in outs] == ["C"] * 40
    c = server.counts
    assert (
        c["ok"] == 40
        and c["rate_limit"] > 0
        and c["server_error"] > 0
        and c["malformed"] > 0
        and c["slow"] > 0
    )
    assert backend.retries == c["rate_limit"] + c["server_error"] + c["malformed"]


def test_auth_error_fails_at_once_without_the_key(serve, monkeypatch):
    server = serve(ScriptedBackend(), api_key="the-right-key")
    backend = LiteLLMBackend(api_model(server))
    with pytest.raises(FlipgateError) as err:
        backend.complete([mcq(0)])
    message = str(err.value)
    assert (
        "status=401" in message and "FLIPGATE_TEST_KEY" in message and "after 1 attempt" in message
    )
    assert KEY not in message and server.counts["unauthorized"] == 1


def test_interrupted_run_keeps_answers_and_resumes_without_repeats(serve, tmp_path, monkeypatch):
    """A failed cell awaits its calls in the air before the error surfaces: every request the
    server got is decided (and every answer cached) by then, and the resume asks only the rest.
    After the 11th answer the server refuses one trial at once and holds the others' refusals
    0.3 s, so calls are always in the air when that trial fails for good: a client that
    cancelled them left them to be decided after ``fail_after`` was lifted, answered uncached and
    asked again by the resume (20 answers instead of 19 when a loaded server was slow)."""
    import support.loopback_server as loopback
    from support.auditors import make_auditor

    server = serve(ScriptedBackend(rule=lambda r: "B"), api_key=KEY, faults=Faults(fail_after=11))
    parse, failing = loopback.request_from_body, {}

    def parse_and_hold(body, prefill):
        request = parse(body, prefill)
        limit = server.faults.fail_after
        refused = limit is not None and server._admitted >= limit
        if refused and failing.setdefault("trial", request.messages) != request.messages:
            time.sleep(0.3)
        return request

    monkeypatch.setattr(loopback, "request_from_body", parse_and_hold)
    auditor = make_auditor(
        tmp_path,
        LiteLLMBackend(api_model(server, retries={"max_attempts": 2, "base_delay_s": 0.01})),
    )
    with pytest.raises(
        FlipgateError, match=r"model 'api' .* call failed after 2 attempt\(s\) for trial"
    ):
        order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    c = server.counts
    assert c["failed_after"] > 2  # calls were in the air when the trial failed
    assert c["requests"] == c["ok"] + c["failed_after"]  # and none is left there
    assert c["ok"] == len(auditor.cache) == 11  # every answer was cached before the error surfaced
    server.faults.fail_after = None
    trials = order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    assert len(trials) == 30 and trials["from_cache"].sum() == 11  # 5 items x K=6
    assert c["ok"] == 30  # only the 19 missing ones were asked again
    summary, _ = facet_summary(trials, "regex")
    assert summary.metrics["parse_rate"].estimate == 1.0


@pytest.mark.slow
def test_embedded_model_served_over_the_openai_api(serve):
    """The real embedded SmolLM2 behind the loopback server gives the same answers as in-process."""
    from flipgate.backends.hf import HFBackend
    from flipgate.config import load_models
    from flipgate.facets import get_facet
    from flipgate.items import load_items

    cfg = {
        **load_models(REPO / "models.yaml").models["smollm2-135m-instruct"],
        "_cache_dir": str(REPO / ".flipgate_cache"),
    }
    local = HFBackend(cfg)
    server = serve(local, api_key=KEY)
    api = LiteLLMBackend(
        api_model(
            server,
            readouts=["regex", "letter_logprob"],
            capabilities={"logprobs": True},
            max_new_tokens=6,
        )
    )
    facet = get_facet("option_order")
    requests = [
        facet.render(it, tuple(range(it.n_options))) for it in load_items(DatasetSpec("mmlu"), 4)
    ]
    remote, direct = api.complete(requests), local.complete(requests)
    for r, d, req in zip(remote, direct, requests):
        assert read_label("regex", r, req.labels, req.answer_prefix) == read_label(
            "regex", d, req.labels, req.answer_prefix
        )
        assert read_label("letter_logprob", r, req.labels, "") == read_label(
            "letter_logprob", d, req.labels, ""
        )


class _Trickle(http.server.BaseHTTPRequestHandler):
    """Sends a 200 and its headers at once, then one byte of the body every 0.5 s (never all):
    each read is quick, the answer never arrives."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(600):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:  # the client gave up
            pass

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_a_trickling_server_is_bounded_by_timeout_s_per_attempt():
    """timeout_s is a wall-clock bound on each attempt: a server that trickles a byte every 0.5 s
    (each read within any read timeout) ends the call after about timeout_s x attempts, counted as
    timeouts and retried per the policy (issue #42: it used to outlive timeout_s: 2 past 240 s)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model = {
            "id": "trickled",
            "backend": "litellm",
            "readouts": ["regex"],
            "source": {
                "model": "openai/scripted",
                "api_base": f"http://127.0.0.1:{server.server_address[1]}/v1",
                "api_key_env": "FLIPGATE_TEST_KEY",
            },
            "timeout_s": 2,
            "retries": {"max_attempts": 2, "base_delay_s": 0.01, "max_delay_s": 0.05},
        }
        backend = LiteLLMBackend(model)
        start = time.monotonic()
        with pytest.raises(FlipgateError) as err:
            backend.complete([mcq(0)])
        elapsed = time.monotonic() - start
    finally:
        server.shutdown()
        server.server_close()
    assert 2 * 2 <= elapsed < 2 * 2 + 3, elapsed
    assert "after 2 attempt(s)" in str(err.value) and KEY not in str(err.value)
    assert backend.call_stats == {"requests": 1, "retries": 1, "timeouts": 2, "failures": 1}


def test_requests_left_in_the_air_when_ctrl_c_closed_the_loop_close_quietly(monkeypatch):
    """A Ctrl-C that ends the event loop while requests are in the air leaves the batch's
    coroutine unfinished; closing it later (garbage collection) must not touch the closed loop:
    before, its cleanup asked the closed loop to cancel them and printed a RuntimeError traceback
    ("Event loop is closed") over the interrupted run's last lines."""
    import asyncio

    source = {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1", "revision": "r1"}
    backend = LiteLLMBackend({"id": "api", "backend": "litellm", "source": source})

    async def in_the_air(request, abort):
        await asyncio.Event().wait()

    monkeypatch.setattr(backend, "_one", in_the_air)
    loop = asyncio.new_event_loop()
    batch = backend._all([mcq(i) for i in range(3)], None)
    loop.create_task(batch)
    loop.run_until_complete(asyncio.sleep(0.01))  # every request in the air
    left = asyncio.all_tasks(loop)
    loop.close()  # as a Ctrl-C out of asyncio.run leaves it
    batch.close()  # what the garbage collector does: no RuntimeError
    for task in left:  # the test's own leftovers, closed quietly (no warnings at exit)
        task._log_destroy_pending = False  # type: ignore[attr-defined]
        task.get_coro().close()


def test_a_ctrl_c_inside_a_request_ends_every_request_before_the_loop_closes(monkeypatch, caplog):
    """The first Ctrl-C raises where the process is: often inside one request's own task (in
    litellm, under ``asyncio.wait_for``). Ending the batch then meets that KeyboardInterrupt again
    in the request that awaited it; before, ``asyncio.run`` stopped ending the batch there and left
    the other requests pending: one "Task was destroyed but it is pending!" (and a traceback) per
    request over the interrupted run's last lines, seen under load in the xdist Ctrl-C test."""
    import asyncio
    import gc

    source = {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1", "revision": "r1"}
    backend = LiteLLMBackend({"id": "api", "backend": "litellm", "source": source})
    started: list[asyncio.Task] = []

    async def answer(request):
        started.append(asyncio.current_task())
        if request.key[1] == "0":
            await asyncio.sleep(0.01)
            raise KeyboardInterrupt("SIGINT")  # where the signal handler raised it
        await asyncio.Event().wait()

    async def one(request, abort):
        return await asyncio.wait_for(answer(request), 60)

    monkeypatch.setattr(backend, "_one", one)
    with pytest.raises(KeyboardInterrupt):
        backend.complete([mcq(i) for i in range(4)])
    gc.collect()
    assert len(started) == 4 and all(task.done() for task in started)
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def test_a_stop_signal_while_the_event_loop_is_made_waits_until_it_is_whole(monkeypatch):
    """A second Ctrl-C of an xdist run once reached a worker inside the event loop's constructor:
    the half-made loop's finaliser printed a traceback ("no attribute '_debug'"). A SIGINT sent
    while the loop is made is handled once it is whole (the code after the signal runs), and the
    interrupt still reaches the caller, with the finished loop closed."""
    import asyncio
    import os
    import signal

    from flipgate.backends import api

    made: list[asyncio.AbstractEventLoop] = []
    real = asyncio.new_event_loop

    def new_event_loop():
        os.kill(os.getpid(), signal.SIGINT)  # unmasked, Python raises it at the next line
        loop = real()
        made.append(loop)
        return loop

    monkeypatch.setattr(api.asyncio, "new_event_loop", new_event_loop)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's: it raises
    try:
        with pytest.raises(KeyboardInterrupt):
            api.whole_event_loop()
    finally:
        signal.signal(signal.SIGINT, handler)
    (loop,) = made  # the constructor ran to its end before the interrupt
    assert loop.is_closed()
    # no signal pending and none blocked afterwards
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == set()
    monkeypatch.setattr(api.asyncio, "new_event_loop", real)
    api.whole_event_loop().close()
