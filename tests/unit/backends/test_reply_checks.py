"""Replies are checked before they are used, and a run that cannot progress says why (issue #60):
the litellm backend against the loopback OpenAI-compatible server (tests/support/
loopback_server.py), its replies bent by the test, with short timeouts and delays."""

from __future__ import annotations

import http.server
import io
import math
import re
import threading
import time
import warnings
from typing import Any, Callable

import pytest
import support.loopback_server as loopback
from support.auditors import make_auditor
from support.loopback_server import Faults, LoopbackServer
from support.scripted import ScriptedBackend

from flipgate import FlipgateError
from flipgate.backends import api
from flipgate.backends.api import (
    MAX_CHARS_PER_TOKEN,
    BadReply,
    ImpossibleLogprobs,
    LiteLLMBackend,
    ReplyWarning,
    Stall,
    checked_logprob,
    label_logprobs,
    reply_choice,
    reply_usage,
)
from flipgate.backends.base import Output, Request
from flipgate.cost import BudgetRefused, Projection, check_budget
from flipgate.order.measure import order_cells
from flipgate.progress import STALLED_AFTER_S, LiveProgress, Snapshot, Wait, describe
from flipgate.readouts import read_label
from flipgate.store import TrialStore

KEY = "sk-flipgate-test-reply-checks"
LABELS = ("A", "B", "C")


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("FLIPGATE_TEST_KEY", KEY)


def model(base_url: str, **extra: Any) -> dict:
    """A litellm entry for the server at ``base_url`` (identity declared: no probe), retried
    quickly."""
    return {
        "id": "api",
        "backend": "litellm",
        "readouts": ["regex", "letter_logprob"],
        "capabilities": {"logprobs": True},
        "source": {
            "model": "openai/scripted",
            "api_base": base_url,
            "api_key_env": "FLIPGATE_TEST_KEY",
            "revision": "r1",
        },
        "retries": {"max_attempts": 3, "base_delay_s": 0.01, "max_delay_s": 0.05},
        "timeout_s": 5,
        **extra,
    }


def mcq(i: int, max_new_tokens: int | None = None) -> Request:
    return Request(
        (("user", f"Question {i}? A. x B. y C. z"),),
        "Answer:",
        LABELS,
        key=("d", str(i), "f", 0, 0),
        max_new_tokens=max_new_tokens,
    )


@pytest.fixture
def bent(serve, monkeypatch):
    """A loopback server answering "B" whose reply bodies pass through ``change(body, n)`` (``n``:
    the replies sent before it) first."""

    def start(change: Callable[[dict, int], dict], **kw: Any) -> LoopbackServer:
        real, sent = loopback.completion_body, []

        def body(*args: Any) -> dict:
            changed = change(real(*args), len(sent))
            sent.append(1)
            return changed

        monkeypatch.setattr(loopback, "completion_body", body)
        return serve(ScriptedBackend(rule=lambda r: "B"), api_key=KEY, **kw)

    return start


def set_logprob(body: dict, token: str, value: Any) -> dict:
    for top in body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]:
        if top["token"] == token:
            top["logprob"] = value
    return body


def one_clean_line(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message and KEY not in message, message


# -- log-probs --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, 5.0, 0.5, "x", None, True, [1.0]])
def test_an_impossible_logprob_is_refused(value):
    with pytest.raises(ImpossibleLogprobs):
        checked_logprob(value)


@pytest.mark.parametrize(
    "value, read", [(-0.5, -0.5), (0, 0.0), (-0.0, 0.0), (5e-4, 0.0), (-math.inf, -math.inf)]
)
def test_a_possible_logprob_is_read(value, read):
    assert checked_logprob(value) == read


def test_minus_infinity_is_probability_zero_without_a_math_error():
    def position(*tops: tuple[str, float]) -> dict:
        top_logprobs = [{"token": t, "logprob": v} for t, v in tops]
        return {"content": [{"token": tops[0][0], "top_logprobs": top_logprobs}]}

    inf = -math.inf
    assert label_logprobs(position((" B", -0.1), (" A", inf)), LABELS) == {"B": -0.1}
    # every spelling of every label at -inf: no label has a probability (a parse failure)
    assert label_logprobs(position((" A", inf), ("A", inf), (" B", inf)), LABELS) == {}
    # legal log-probs whose probabilities underflow: summed without log(0)
    both = label_logprobs(position((" B", -800.0), ("B", -800.0)), LABELS)
    assert both == {"B": pytest.approx(-800 + math.log(2))}


@pytest.mark.parametrize("value", [math.nan, 5.0, math.inf, 0.2])
def test_impossible_logprobs_are_left_out_and_noted_once(bent, value):
    """NaN for the answer label, a positive log-prob, +inf: never used (the sweep read +5.0 for
    every label as flip_rate 1.000); the text still answers, letter_logprob records a parse
    failure, the output is noted and the model warned once."""
    server = bent(lambda body, n: set_logprob(body, " B", value))
    backend = LiteLLMBackend(model(server.base_url))
    with pytest.warns(ReplyWarning, match=r"model 'api' .*impossible log-probs") as caught:
        outs = backend.complete([mcq(i) for i in range(3)])
    assert len([w for w in caught if w.category is ReplyWarning]) == 1
    assert [o.label_logprobs for o in outs] == [{}] * 3
    assert [o.notes for o in outs] == [["logprobs_dropped"]] * 3
    assert [read_label("letter_logprob", o, LABELS, "") for o in outs] == [None] * 3
    assert [read_label("regex", o, LABELS, "Answer:") for o in outs] == ["B"] * 3
    assert Output.from_dict(outs[0].to_dict()).notes == ["logprobs_dropped"]  # kept in the cache
    assert server.counts["requests"] == 3  # not asked again: a retry would say the same


def test_a_legal_minus_infinity_from_the_server_is_read(bent):
    server = bent(lambda body, n: set_logprob(body, " A", -math.inf))
    backend = LiteLLMBackend(model(server.base_url))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplyWarning)
        (out,) = backend.complete([mcq(0)])
    assert read_label("letter_logprob", out, LABELS, "") == "B" and "A" not in out.label_logprobs
    assert out.notes == []


# -- choices ----------------------------------------------------------------------------------


@pytest.mark.parametrize("choices", [[], None, "x", "missing"])
def test_a_reply_without_choices_is_malformed(choices):
    class Reply:
        pass

    reply = Reply()
    if choices != "missing":
        reply.choices = choices  # type: ignore[attr-defined]
    with pytest.raises(BadReply, match="no choices"):
        reply_choice(reply)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # litellm's, on "not a list"
@pytest.mark.parametrize("choices", [[], None, "missing", "not a list"])
def test_a_reply_without_choices_is_retried_then_one_clean_line(bent, choices):
    """``"choices": []`` was an IndexError traceback, not retried (the docs say a malformed reply
    is); missing or null choices were a litellm error with a traceback in its message."""

    def change(body: dict, n: int) -> dict:
        if choices == "missing":
            del body["choices"]
        else:
            body["choices"] = choices
        return body

    server = bent(change)
    backend = LiteLLMBackend(model(server.base_url))
    with pytest.raises(FlipgateError) as err:
        backend.complete([mcq(0)])
    message = str(err.value)
    one_clean_line(message)
    assert message.startswith("model 'api' (openai/scripted): call failed after 3 attempt(s)")
    assert server.counts["ok"] == 3 and backend.call_stats["retries"] == 2


def test_a_reply_without_choices_once_is_answered_by_the_retry(bent):
    server = bent(lambda body, n: {**body, "choices": []} if n == 0 else body)
    (out,) = LiteLLMBackend(model(server.base_url)).complete([mcq(0)])
    assert read_label("regex", out, LABELS, "Answer:") == "B" and server.counts["ok"] == 2


# -- usage ------------------------------------------------------------------------------------


def usage(prompt: Any, completion: Any) -> Any:
    class Usage:
        prompt_tokens = prompt
        completion_tokens = completion

    return Usage()


@pytest.mark.parametrize(
    "prompt, completion, why",
    [
        (3, -1e12, "completion_tokens -1000000000000"),
        (-1, 2, "prompt_tokens -1"),
        (3, math.nan, "completion_tokens nan"),
        (3.5, 2, "prompt_tokens 3.5"),
        ("7", 2, "prompt_tokens '7'"),
        (3, True, "completion_tokens True"),
        (3, 1e12, "completion_tokens 1000000000000 for max_new_tokens 8"),
        (3, 2 * 8 + 17, "completion_tokens 33 for max_new_tokens 8"),
        (10**9, 2, "prompt_tokens 1000000000 for a prompt of about"),
        (0, 0, "no usage"),
        (None, None, "prompt_tokens None"),
    ],
)
def test_impossible_usage_is_not_believed(prompt, completion, why):
    got = reply_usage(usage(prompt, completion), mcq(0), 8)
    assert isinstance(got, str) and got.startswith(why), got


def test_possible_usage_is_believed():
    assert reply_usage(usage(12, 8), mcq(0), 8) == (12, 8)
    assert reply_usage(usage(12.0, 2 * 8 + 16), mcq(0), 8) == (12, 32)  # within the allowance


@pytest.mark.parametrize("completion", [-1e12, 10**12, "missing"])
def test_impossible_usage_costs_the_conservative_estimate(bent, completion):
    """A server reporting ``completion_tokens: -1e12`` with a price made each trial cost -1e9 USD
    and the projection -1.4e11 (under any budget): the estimate is counted instead, noted."""

    def change(body: dict, n: int) -> dict:
        if completion == "missing":
            del body["usage"]
        else:
            body["usage"]["completion_tokens"] = completion
        return body

    server = bent(change)
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    backend = LiteLLMBackend(model(server.base_url, price=price, max_new_tokens=8))
    with pytest.warns(ReplyWarning, match=r"model 'api' .*impossible usage"):
        outs = backend.complete([mcq(0), mcq(1)])
    for out in outs:
        assert out.tokens_out == 8 and out.tokens_in > 10  # the estimate: chars/2 + allowance
        assert out.cost_usd == pytest.approx((out.tokens_in * 1.0 + 8 * 2.0) / 1e6)
        assert out.notes == ["usage_estimated"]


def test_the_cost_guard_refuses_an_impossible_projection():
    sane = Projection("good", n_calls=1, tokens_in=10, tokens_out=2, usd=0.01)
    for bad in (
        Projection("api", n_calls=32, tokens_in=100, tokens_out=-3.2e13, usd=-1.4e11),
        Projection("api", n_calls=1, tokens_in=math.nan, tokens_out=2, usd=math.nan),
        Projection("api", n_calls=1, pilot_usd=-1.0),
    ):
        with pytest.raises(BudgetRefused, match="impossible projection for api"):
            check_budget([sane, bad], 5.0)
    check_budget([sane], 5.0)


# -- reply size -------------------------------------------------------------------------------


def test_a_text_longer_than_max_new_tokens_allows_is_cut_and_noted(bent):
    server = bent(lambda body, n: set_content(body, "Answer: B\n" + "x" * 4990))
    backend = LiteLLMBackend(model(server.base_url, max_new_tokens=8, readouts=["regex"]))
    with pytest.warns(ReplyWarning, match=r"model 'api' .*5000 characters .* was cut to"):
        outs = backend.complete([mcq(0), mcq(1, max_new_tokens=16)])
    assert [len(o.text) for o in outs] == [
        MAX_CHARS_PER_TOKEN * n + len("Answer:") for n in (8, 16)
    ]
    assert [o.notes for o in outs] == [["text_cut"]] * 2
    assert read_label("regex", outs[0], LABELS, "") == "B"


def set_content(body: dict, text: str) -> dict:
    body["choices"][0]["message"]["content"] = text
    return body


def test_a_reply_body_far_larger_than_max_new_tokens_allows_is_not_read(bent):
    """A 10 MB reply per call with max_new_tokens 8 was stored whole (336 MB of trials for 32):
    the body is read up to its bound, then the reply is malformed, retried, one clean line."""
    server = bent(lambda body, n: set_content(body, "x" * 10_000_000))
    backend = LiteLLMBackend(
        model(server.base_url, max_new_tokens=8, retries={"max_attempts": 2, "base_delay_s": 0})
    )
    with pytest.raises(FlipgateError) as err:
        backend.complete([mcq(0)])
    message = str(err.value)
    one_clean_line(message)
    assert (
        "after 2 attempt(s)" in message and "malformed reply: the reply body is larger" in message
    )


# -- redirects --------------------------------------------------------------------------------


def redirecting(target: str | None, status: int = 307) -> http.server.ThreadingHTTPServer:
    """A server that redirects every request to ``target`` + its path (None: to itself, under
    /v2)."""

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(status)
            to = target or f"http://127.0.0.1:{self.server.server_address[1]}/v2"
            self.send_header("Location", to + self.path.removeprefix("/v1"))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("status", [307, 308, 302])
def test_a_redirect_to_another_host_is_refused(serve, status):
    """A 307 to another host was followed: every answer came from it, the card unchanged."""
    target = serve(ScriptedBackend(rule=lambda r: "B"), api_key=KEY)
    other = target.base_url.replace("127.0.0.1", "localhost")
    front = redirecting(other, status)
    try:
        here = f"127.0.0.1:{front.server_address[1]}"
        backend = LiteLLMBackend(model(f"http://{here}/v1"))
        with pytest.raises(FlipgateError) as err:
            backend.complete([mcq(0)])
    finally:
        front.shutdown()
        front.server_close()
    message = str(err.value)
    one_clean_line(message)
    assert message.startswith("model 'api' (openai/scripted): call failed after 1 attempt(s)")
    assert f"the server at {here} redirected the call (HTTP {status})" in message
    assert f"another host, localhost:{target.httpd.server_address[1]}" in message
    assert "follow_redirects: true" in message and target.counts["requests"] == 0


def test_a_redirect_within_the_host_is_refused_too():
    front = redirecting(None)
    try:
        here = f"127.0.0.1:{front.server_address[1]}"
        backend = LiteLLMBackend(model(f"http://{here}/v1"))
        with pytest.raises(
            FlipgateError,
            match=rf"redirected the call \(HTTP 307\) to http://{here}/v2/chat/completions "
            r"\(the same host\)",
        ):
            backend.complete([mcq(0)])
    finally:
        front.shutdown()
        front.server_close()


def test_a_declared_redirect_is_followed_and_keyed(serve):
    """(The HTTP client sends no key to another host: the target here asks for none.)"""
    target = serve(ScriptedBackend(rule=lambda r: "C"))
    front = redirecting(target.base_url)
    try:
        url = f"http://127.0.0.1:{front.server_address[1]}/v1"
        backend = LiteLLMBackend(model(url, follow_redirects=True))
        (out,) = backend.complete([mcq(0)])
    finally:
        front.shutdown()
        front.server_close()
    assert read_label("regex", out, LABELS, "Answer:") == "C" and target.counts["ok"] == 1
    assert backend.settings["follow_redirects"] is True
    assert "follow_redirects" not in LiteLLMBackend(model(url)).settings  # other keys unchanged


# -- a run that cannot progress says why ------------------------------------------------------


def test_an_absurd_retry_after_fails_at_once(serve):
    """A 429 with Retry-After 99999 and the default retries held the run 5 minutes at 0/16:
    longer than the attempts left may wait, it now fails the call at once, naming the wait."""
    server = serve(
        ScriptedBackend(), api_key=KEY, faults=Faults(rate_limit=1.0, retry_after_s=99999)
    )
    entry = model(server.base_url)
    del entry["retries"]  # the defaults: 6 attempts, up to 60 s each
    backend = LiteLLMBackend(entry)
    start = time.monotonic()
    with pytest.raises(FlipgateError) as err:
        backend.complete([mcq(i) for i in range(4)])
    assert time.monotonic() - start < 5
    message = str(err.value)
    one_clean_line(message)
    assert message.startswith("model 'api' (openai/scripted): call failed after 1 attempt(s)")
    assert "HTTP 429, Retry-After 99999 s: the server asks to wait 99999 s" in message
    assert "5 attempt(s) left may wait (retries.max_delay_s 60 s each)" in message


def test_calls_tell_what_they_wait_on(serve):
    """Each failed attempt tells ``on_wait`` its status, Retry-After and attempts left, with the
    time since no answer came."""
    server = serve(
        ScriptedBackend(), api_key=KEY, faults=Faults(rate_limit=1.0, retry_after_s=0.01)
    )
    told: list[tuple[str, float]] = []
    start = time.time()
    with pytest.raises(FlipgateError, match="after 3 attempt"):
        LiteLLMBackend(model(server.base_url)).complete([mcq(0)], on_wait=lambda *a: told.append(a))
    assert [reason for reason, _ in told] == [
        "waiting for a reply: timeout_s 5 s, 3 attempts",
        "HTTP 429, Retry-After 0.01 s, 2 of 3 attempts left",
        "HTTP 429, Retry-After 0.01 s, 1 of 3 attempts left",
    ]
    assert all(start <= since <= start + 1 for _, since in told)  # no answer since the start


def test_a_silent_server_is_told_as_timeouts(serve):
    server = serve(ScriptedBackend(), api_key=KEY, faults=Faults(slow=1.0, slow_s=30))
    told: list[str] = []
    backend = LiteLLMBackend(model(server.base_url, timeout_s=0.3))
    with pytest.raises(FlipgateError, match="after 3 attempt"):
        backend.complete([mcq(0)], on_wait=lambda reason, since: told.append(reason))
    assert told[1:] == [
        "no reply within timeout_s 0.3 s, 2 of 3 attempts left",
        "no reply within timeout_s 0.3 s, 1 of 3 attempts left",
    ]


def test_answers_refresh_the_wait_at_most_every_few_seconds(monkeypatch):
    told: list[tuple[str, float]] = []
    now = [1000.0]

    class Clock:
        @staticmethod
        def time() -> float:
            return now[0]

    monkeypatch.setattr(api, "time", Clock)
    stall = Stall(lambda *a: told.append(a), "waiting")
    stall.failed("HTTP 429")
    now[0] += 1
    stall.answered()  # ends the wait: told at once
    now[0] += 1
    stall.answered()  # nothing new within WAIT_NOTE_EVERY_S: not told (no store write)
    now[0] += 10
    stall.answered()
    assert told == [
        ("waiting", 1000.0),
        ("HTTP 429", 1000.0),
        ("waiting", 1001.0),
        ("waiting", 1012.0),
    ]


def test_the_progress_line_names_a_stalled_model_first():
    snap = Snapshot(
        {"api": (0, 16), "local": (8, 16)},
        waits=(
            Wait("api", "HTTP 429, Retry-After 30 s, 4 of 6 attempts left", 1000.0),
            Wait("api", "waiting for a reply", 1010.0),
            Wait("local", "waiting for a reply", 1050.0),
        ),
    )
    assert describe(snap, None, now=1065.0) == (
        "8/32 trials (25%) · api: no answer in 1:05 (HTTP 429, Retry-After 30 s, 4 of 6 "
        "attempts left) · api 0/16 · local 8/16"
    )
    assert describe(snap, None, now=1000.0 + STALLED_AFTER_S - 1) == (
        "8/32 trials (25%) · api 0/16 · local 8/16"
    )


def test_a_rate_limited_call_shows_on_the_progress_line_within_a_minute(serve, tmp_path):
    """Through the run's store: the auditor passes ``on_wait`` to the call, the controller's
    progress reads it (a minute on, by its clock), and the wait is cleared with the call."""
    server = serve(
        ScriptedBackend(), api_key=KEY, faults=Faults(rate_limit=1.0, retry_after_s=0.01)
    )
    auditor = make_auditor(tmp_path, LiteLLMBackend(model(server.base_url)))
    lines = io.StringIO()
    seen: list[str] = []
    real = TrialStore.set_wait

    def set_wait(store: TrialStore, *args: Any) -> None:
        real(store, *args)
        progress = LiveProgress(store.path, lines, "lines", wall_clock=lambda: time.time() + 60)
        progress.stop()  # draws the line once
        seen.append(lines.getvalue().splitlines()[-1])

    auditor.store.set_wait = set_wait.__get__(auditor.store)  # type: ignore[method-assign]
    auditor.store.add_planned({("scripted", "arc_challenge", "option_order"): 30})
    with pytest.raises(FlipgateError, match="call failed after 3 attempt"):
        order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    assert re.search(
        r"^flipgate: progress 0/30 trials \(0%\) · scripted: no answer in 1:0\d \(HTTP 429, "
        r"Retry-After 0.01 s, 1 of 3 attempts left\) · scripted 0/30 · longest call: ",
        seen[-1],
    ), seen
    assert auditor.store.conn.execute("SELECT COUNT(*) FROM waits").fetchone() == (0,)
