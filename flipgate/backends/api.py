"""The API backend (``backend: litellm``): closed and hosted models (OpenAI, Anthropic, Gemini,
...) through litellm, and any OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, ollama, one
flipgate starts) through flipgate's direct client (:mod:`.openai_http`), which costs a tenth of
litellm's CPU a request: the client must never be what limits a served model.

Async calls, sent in the order given, under ``concurrency`` for the entry across the run's
pytest-xdist workers (:mod:`.slots`), on an event loop kept for the process (the direct client's
keep-alive connections serve every call); retries with exponential backoff and full jitter on 429,
5xx, timeouts and connection errors, honouring Retry-After; other errors (401, 400, ...) fail at
once. Each finished output is handed to ``on_output`` as it returns, so the caller can cache it
and an interruption loses nothing already answered; when one call fails for good, no new attempt
starts and the calls already in the air are awaited (their answers handed over too) before the
error surfaces, so no call outlives its cell and a resume never repeats an answered call. The API
key is read from the environment variable named in ``source.api_key_env`` and never stored, logged
or put in an error message; credentials in ``source.api_base`` (``user:password@``, ``?api_key=``)
are used for the calls only: settings, fingerprint and messages carry the redacted URL.

Every reply is checked in one place, :meth:`LiteLLMBackend._output`, before anything of it is
used (docs/configuration.md, "Replies"): a reply with no choices, or a body larger than the
call's ``max_new_tokens`` allows (:data:`REPLY_BYTES_PER_TOKEN`), is malformed and retried; a
text longer than ``max_new_tokens`` allows is cut (:data:`MAX_CHARS_PER_TOKEN`); impossible
log-probs (NaN, +inf, above 0) are left out and impossible usage (negative, not whole, more
output than ``max_new_tokens`` allows, none) replaced by the cost guard's conservative estimate,
each noted on the output (:data:`~flipgate.backends.base.REPLY_NOTES`) and warned once per model.
An OpenAI-compatible server (``api_base``) is called through a client that follows no redirect
unless the entry sets ``follow_redirects: true``: answers come from the host the card names.
While no answer comes, ``on_wait`` is told why (the last refusal or timeout, attempts left), for
the live progress line; a Retry-After longer than the retries left may wait fails the call at
once.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import math
import os
import random
import signal
import sys
import threading
import time
import urllib.parse
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from flipgate import FlipgateError
from flipgate.backends.base import Output, Request, estimate_tokens
from flipgate.backends.identity import (
    PER_RUN,
    PROBE_TIMEOUT_S,
    ModelIdentity,
    ask_server,
    declared_identity,
    hosted_identity,
    served_name,
    server_identity,
)
from flipgate.backends.openai_http import (
    BadReply,
    DirectClient,
    direct_prefix,
    too_large,
)
from flipgate.backends.price_map import compatible_params, map_price
from flipgate.backends.servers import ManagedServer
from flipgate.backends.slots import Slots, run_slots_dir
from flipgate.backends.source import public_source
from flipgate.files import user_cache_dir
from flipgate.redact import redact, refuse_key_as_name


def import_litellm():
    """litellm, imported only after ``LITELLM_LOCAL_MODEL_COST_MAP`` is set (:mod:`.price_map`,
    which this module imports, sets it), so litellm reads its bundled price map instead of fetching
    one from the network."""
    import litellm

    return litellm


RETRIABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
DEFAULT_CAPABILITIES = {"logprobs": False, "images": False, "seed": False}

#: a generous bound on the characters one generated token carries: a token averages ~4, and the
#: longest of common vocabularies (runs of spaces, dashes or "=") stay well below this, so a
#: reply's text longer than ``max_new_tokens`` times this (plus the answer prefix a server may
#: echo) did not come from ``max_new_tokens`` tokens; it is cut there and noted, not stored whole
MAX_CHARS_PER_TOKEN = 128
#: the reply body read per call, at most: a base for the JSON around the answer, plus per token
#: its text escaped in JSON (up to 12 bytes a character) and 20 top log-probs with their byte
#: arrays (~3 KiB); a longer body is not read on (a malformed reply), so memory stays bounded
REPLY_BYTES_BASE = 1 << 20
REPLY_BYTES_PER_TOKEN = 16 * 1024
#: a log-prob above 0 is a probability above 1; a server computing in half precision may round
#: log(1) a little above 0, so up to this much is read as 0
LOGPROB_ROUNDING = 1e-3
#: completion tokens a server may count beyond ``max_tokens`` (an end token, a server that
#: overruns a little) before its usage is impossible: up to FACTOR x max_tokens + ALLOWANCE
COMPLETION_TOKENS_FACTOR = 2
COMPLETION_TOKENS_ALLOWANCE = 16
#: prompt tokens a server may count per token of the cost guard's conservative estimate (1 per
#: 2 characters; some scripts take several tokens a character, some images far more than its
#: allowance) before its usage is impossible
PROMPT_TOKENS_FACTOR = 16
#: how often (seconds) answers refresh the "no answer since" time told to ``on_wait``: well
#: under flipgate.progress.STALLED_AFTER_S, so a model that answers is never shown as stalled,
#: and at most one store write per this many seconds however fast answers come
WAIT_NOTE_EVERY_S = 5.0


class ImpossibleLogprobs(ValueError):
    """Log-probs no distribution has: NaN, +inf or above 0, or not a number."""


class ReplyWarning(UserWarning):
    """A reply flipgate could use only in part: its text cut, its log-probs or its usage
    impossible (once per model and kind)."""


def field(obj: Any, name: str) -> Any:
    """``obj[name]`` of a reply parsed by the direct client (dicts), ``obj.name`` of litellm's
    reply objects; None when absent."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def one_line(text: str, limit: int = 300) -> str:
    """``text`` as one line of at most ``limit`` characters, without the traceback litellm puts in
    some messages ("Invalid response object Traceback (most recent call last): ...")."""
    text = text.split("Traceback (most recent call last)")[0]
    return " ".join(text.split())[:limit]


def bad_reply_in(exc: BaseException) -> BadReply | None:
    """The :class:`BadReply` behind ``exc``, if any: the reply guard raises it inside the HTTP
    client, which the OpenAI SDK and litellm wrap (as a connection error) in exceptions of their
    own, keeping it as the cause or context."""
    seen: BaseException | None = exc
    for _ in range(12):  # the wrapping is a few levels deep; never loop on a cycle
        if seen is None:
            return None
        if isinstance(seen, BadReply):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def response_header(exc: BaseException, name: str) -> str | None:
    """A header of the reply that failed (litellm keeps them on its exceptions, the direct
    client on :class:`HTTPStatusError`), if it came."""
    for headers in (
        getattr(exc, "headers", None),
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        value = headers.get(name) if headers is not None else None
        if value is not None:
            return str(value)
    return None


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After: seconds or an HTTP date), if it did."""
    value = response_header(exc, "retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        return None if parsed is None else max(0.0, email.utils.mktime_tz(parsed) - time.time())


def is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return True
    litellm = sys.modules.get("litellm")  # its errors only where it was imported (its path)
    return litellm is not None and isinstance(exc, litellm.Timeout)


def is_connection_error(exc: BaseException) -> bool:
    """The connection failed (refused, reset, closed mid-reply): aiohttp's error on the direct
    path, litellm's on its own."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientError) and not isinstance(
        exc, (aiohttp.ClientResponseError, aiohttp.InvalidURL)
    ):
        return True
    litellm = sys.modules.get("litellm")
    return litellm is not None and isinstance(exc, litellm.APIConnectionError)


def is_retriable(exc: BaseException) -> bool:
    """A timeout, a connection error, a retriable status or a malformed reply."""
    if is_timeout(exc) or is_connection_error(exc) or isinstance(exc, BadReply):
        return True
    return getattr(exc, "status_code", None) in RETRIABLE_STATUS


def host_of(url: str) -> str:
    """``url``'s host and port (``api.example.com:8443``), as messages name it."""
    return urllib.parse.urlsplit(url).netloc.rpartition("@")[2] or url


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@``, and those credentials as an ``Authorization: Basic``
    value (None when it has none): what an HTTP client makes of a URL's credentials, done here
    because litellm's transport refuses them next to the API key's header."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    return parts._replace(netloc=host).geturl(), f"Basic {base64.b64encode(pair.encode()).decode()}"


def content_parts(text: str, images: tuple[bytes, ...]) -> str | list[dict]:
    """OpenAI chat content: plain text, or text and data-URL image parts for each "<image>"."""
    if "<image>" not in text:
        return text
    parts, chunks = [], text.split("<image>")
    for i, chunk in enumerate(chunks):
        if i:
            data = images[i - 1]
            mime = "image/jpeg" if data[:3] == b"\xff\xd8\xff" else "image/png"
            parts.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"},
                }
            )
        if chunk:
            parts.append({"type": "text", "text": chunk})
    return parts


def checked_logprob(value: Any) -> float:
    """A log-prob as a float: ``-inf`` (probability 0) as it is, a rounding above 0 (up to
    :data:`LOGPROB_ROUNDING`) as 0; :class:`ImpossibleLogprobs` for NaN, +inf, a value above 0,
    or anything not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ImpossibleLogprobs(f"log-prob {value!r} is not a number")
    if not value <= LOGPROB_ROUNDING:  # NaN compares false: caught here too
        raise ImpossibleLogprobs(f"log-prob {value!r} (a probability above 1, or NaN)")
    return min(float(value), 0.0)


def log_sum_exp(values: list[float]) -> float:
    """log(sum(exp(v))), computed about the largest value: no log(0) when every term underflows
    (-800 is a legal log-prob), -inf only when every value is -inf."""
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def label_logprobs(logprobs: Any, labels: tuple[str, ...]) -> dict[str, float]:
    """Log-probs of each label from ``top_logprobs`` at the answer position: the first generated
    token that is a label (" B", "(B", "B"), else the first position with a label among its
    alternatives; spellings of one label are summed. Each top log-prob at a position read is
    checked (:func:`checked_logprob`), raising :class:`ImpossibleLogprobs`; a label whose every
    spelling is at -inf (probability 0) is left out, as one outside the top log-probs is."""
    if not labels or logprobs is None:
        return {}
    content = field(logprobs, "content")

    def label_of(obj: Any) -> str | None:
        token = field(obj, "token")
        return token.strip(" (*") if isinstance(token, str) else None

    def at(position: Any) -> dict[str, float]:
        found: dict[str, list[float]] = {}
        for top in field(position, "top_logprobs") or []:
            value = checked_logprob(field(top, "logprob"))
            label = label_of(top)
            if label in labels:
                found.setdefault(label, []).append(value)
        summed = {k: log_sum_exp(vs) for k, vs in found.items()}
        return {k: v for k, v in summed.items() if v > -math.inf}

    positions = content or []
    for position in positions:
        if label_of(position) in labels:
            return at(position)
    return next((found for found in map(at, positions) if found), {})


def reply_choice(resp: Any) -> Any:
    """The reply's first choice; :class:`BadReply` when it has none (``choices`` empty, missing,
    null: litellm turns the last two into an error of its own, retried the same way)."""
    choices = field(resp, "choices")
    if not isinstance(choices, list) or not choices:
        raise BadReply(f"the reply has no choices (choices: {one_line(repr(choices), 40)})")
    return choices[0]


def reply_text(choice: Any) -> str:
    """The choice's message text ("" when it has none: a refusal, a tool call); :class:`BadReply`
    when it is something else than text."""
    content = field(field(choice, "message"), "content")
    if content is None:
        return ""
    if not isinstance(content, str):
        raise BadReply(f"the reply's message content is not text ({type(content).__name__})")
    return content


def reply_usage(usage: Any, request: Request, max_tokens: int) -> tuple[int, int] | str:
    """The reply's (prompt, completion) token counts, or why they cannot be believed: a count
    that is not a whole number 0 or more (negative, NaN, 3.5, a string), no usage (0 and 0: how
    litellm reads a reply without one), more completion tokens than ``max_tokens`` allows
    (:data:`COMPLETION_TOKENS_FACTOR`) or more prompt tokens than the prompt could take
    (:data:`PROMPT_TOKENS_FACTOR` x the cost guard's conservative estimate)."""
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        value = field(usage, name)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"{name} {value!r}"
        counts.append(value)
    n_in, n_out = counts
    if n_in == n_out == 0:
        return "no usage (0 prompt and 0 completion tokens)"
    if n_out > COMPLETION_TOKENS_FACTOR * max_tokens + COMPLETION_TOKENS_ALLOWANCE:
        return f"completion_tokens {n_out} for max_new_tokens {max_tokens}"
    estimate = estimate_tokens(request, max_tokens)[0]
    if n_in > PROMPT_TOKENS_FACTOR * estimate:
        return f"prompt_tokens {n_in} for a prompt of about {estimate} tokens"
    return n_in, n_out


def reply_bytes(max_tokens: int) -> int:
    """The most reply body a call of ``max_tokens`` output tokens reads (:data:`REPLY_BYTES_BASE`,
    :data:`REPLY_BYTES_PER_TOKEN`)."""
    return REPLY_BYTES_BASE + REPLY_BYTES_PER_TOKEN * max_tokens


def openai_client(
    api_base: str, api_key: str | None, timeout_s: float, limit: int, follow_redirects: bool
) -> Any:
    """An OpenAI SDK client for an OpenAI-compatible server at ``api_base``, handed to litellm
    (``client=``) in place of its own: it reads no reply body past ``limit`` bytes (a
    :class:`BadReply`, retried) and follows a redirect only when ``follow_redirects``: the SDK's
    own client follows every one, so answers came from whatever host a server named while the
    card named ``api_base``."""
    import httpx
    import openai

    class CappedBody(httpx.AsyncByteStream):
        """A reply body that raises :class:`BadReply` once more than ``limit`` bytes came."""

        def __init__(self, inner: httpx.AsyncByteStream):
            self.inner = inner

        async def __aiter__(self):  # type: ignore[override]
            seen = 0
            async for chunk in self.inner:
                seen += len(chunk)
                if seen > limit:
                    raise BadReply(too_large(limit))
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class CappedTransport(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await super().handle_async_request(request)
            assert isinstance(response.stream, httpx.AsyncByteStream)
            response.stream = CappedBody(response.stream)
            return response

    http = httpx.AsyncClient(
        transport=CappedTransport(),
        follow_redirects=follow_redirects,
        timeout=timeout_s,
        limits=openai.DEFAULT_CONNECTION_LIMITS,
    )
    return openai.AsyncOpenAI(
        api_key=api_key or "unused",  # the client insists on one; a server without keys ignores it
        base_url=api_base,
        http_client=http,
        max_retries=0,
        timeout=timeout_s,
    )


@dataclass(frozen=True)
class Failure:
    """A failed attempt as flipgate reports it: ``why`` for the error line, ``brief`` for the
    progress line, whether it is retried, and the wait the server asked for (Retry-After)."""

    why: str
    brief: str
    retriable: bool
    wait: float | None = None


class Stall:
    """What one :meth:`LiteLLMBackend.complete` waits on, told to its ``on_wait(reason, since)``:
    ``reason`` the last refusal or timeout since the last answer (or that a reply is awaited),
    ``since`` when the last answer came (or the call started), Unix time. Told when the call
    starts, on each failed attempt, and when an answer ends a wait or :data:`WAIT_NOTE_EVERY_S`
    has passed since it was last told; the progress line shows a model none of whose calls has
    answered for a while (flipgate/progress.py)."""

    def __init__(self, tell: Callable[[str, float], None] | None, idle: str):
        self.tell, self.idle = tell, idle
        self.reason, self.since, self.told = idle, time.time(), -math.inf
        self._tell()

    def _tell(self) -> None:
        if self.tell is not None:
            self.told = time.time()
            self.tell(self.reason, self.since)

    def failed(self, reason: str) -> None:
        self.reason = reason
        self._tell()

    def answered(self) -> None:
        self.since = time.time()
        if self.reason != self.idle or self.since - self.told >= WAIT_NOTE_EVERY_S:
            self.reason = self.idle
            self._tell()


class LiteLLMBackend:
    """One models.yaml entry with ``backend: litellm``."""

    streams_outputs = True

    def __init__(self, cfg: dict[str, Any]):
        self.model_id = cfg["id"]
        source = cfg.get("source") or {}
        #: what the card names as the source (a served package or file: :mod:`.source`)
        shown = public_source(source) if cfg.get("server") else None
        #: the inference server flipgate starts for this entry (``server:``), else None
        self.server: ManagedServer | None = None
        #: who answers (set below; a managed server's is its weights digest, in its fingerprint)
        self.identity: ModelIdentity | None = None
        if cfg.get("server"):
            self.server = ManagedServer(cfg, Path(cfg.get("_cache_dir") or user_cache_dir()))
            source = {"model": f"openai/{self.server.served_name}"}
        if "model" not in source:
            raise FlipgateError(
                f"model {self.model_id!r}: field source.model (the provider model id, e.g. "
                f"'openai/gpt-4o-mini') is required for backend litellm"
            )
        self.model = source["model"]
        base: str | None = source.get("api_base")
        #: how the calls are made: "direct" (:mod:`.openai_http`: an OpenAI-compatible server at
        #: ``api_base`` or one flipgate started) or "litellm" (every other provider, or ``client:
        #: litellm``); the answers, cache keys and card are the same either way
        self.client = (
            "direct"
            if direct_prefix(self.model, bool(base or self.server), cfg.get("client"))
            else "litellm"
        )
        if cfg.get("client") == "direct" and self.client != "direct":
            raise FlipgateError(
                f"model {self.model_id!r}: field client: 'direct' is for an OpenAI-compatible "
                f"server: source.model 'openai/<name>' or 'hosted_vllm/<name>' with source."
                f"api_base (or a server: block), not {self.model!r}"
                + ("" if base or self.server else " without api_base")
            )
        if self.client == "litellm":
            import_litellm().suppress_debug_info = True
        #: ``source.api_base`` with its credentials hidden: what is keyed, stored and shown
        self.api_base = redact(base) if base else base
        # for the calls only: the URL as given, its user:password@ sent as Basic auth
        self._api_base: str | None = base
        self._basic_auth: str | None = None
        if base:
            self._api_base, self._basic_auth = split_userinfo(base)
        self.key_env = source.get("api_key_env")
        self._api_key = None
        if self.key_env:
            refuse_key_as_name(self.key_env, f"model {self.model_id!r}: field source.api_key_env")
            self._api_key = os.environ.get(self.key_env)
            if not self._api_key:
                raise FlipgateError(
                    f"model {self.model_id!r}: environment variable {self.key_env!r} "
                    f"(source.api_key_env) is not set"
                )
        self.capabilities = {**DEFAULT_CAPABILITIES, **(cfg.get("capabilities") or {})}
        self.decoding = dict(cfg.get("decoding") or {})
        self.unsupported = set(cfg.get("unsupported_params") or ())
        self.max_new_tokens = int(cfg.get("max_new_tokens", 16))
        self.concurrency = int(cfg.get("concurrency", 8))
        self.batch_size = 10**9  # the backend windows its own requests under ``concurrency``
        retries = cfg.get("retries") or {}
        self.max_attempts = int(retries.get("max_attempts", 6))
        self.base_delay_s = float(retries.get("base_delay_s", 1.0))
        self.max_delay_s = float(retries.get("max_delay_s", 60.0))
        if self.server is not None:
            self.concurrency = int(cfg.get("concurrency", self.server.spec.parallel))
            # the OpenAI client litellm uses insists on a key; the server wants none
            self._api_key = "no-key" if self.client == "litellm" else None
        #: the answer prefix sent as the start of the assistant's reply, which the model
        #: continues (as the hf backend does); for servers that continue a final assistant
        #: message (llama.cpp's does; vLLM and SGLang with extra_body continue_final_message)
        default_prefill = self.server is not None and self.server.spec.engine == "llama.cpp"
        self.answer_prefill = bool(cfg.get("answer_prefill", default_prefill))
        self.extra_body: dict[str, Any] = dict(cfg.get("extra_body") or {})
        self.timeout_s = float(cfg.get("timeout_s", 120.0))
        #: follow a server's redirects (to any host); by default none is followed
        self.follow_redirects = bool(cfg.get("follow_redirects", False))
        self.price = cfg.get("price")
        #: USD per input and per output token on the direct path, resolved once: ``price``, else
        #: litellm's bundled price map (:mod:`.price_map`); None when unknown (counted as 0 and
        #: flagged by the cost guard)
        self.unit_price = (
            (
                self.price.get("input_per_mtok", 0.0) / 1e6,
                self.price.get("output_per_mtok", 0.0) / 1e6,
            )
            if self.price
            else map_price(self.model)
        )
        #: the kinds of :class:`ReplyWarning` already given for this model (each is given once)
        self._warned: set[str] = set()
        #: the OpenAI client handed to litellm, and the :class:`Stall`, of the :meth:`complete`
        #: under way
        self._sdk: Any = None
        #: the event loop of the calls, with the direct path's client: made at the first call and
        #: kept for the process (keep-alive connections across calls), ended by :meth:`close`
        self._loop = CallLoop()
        weakref.finalize(self, self._loop.close)
        self._slots: Slots | None = None
        self._slots_key = ""
        self._stall = Stall(None, "")
        self.readouts = list(cfg.get("readouts", ["regex"]))
        if "letter_logprob" in self.readouts and not self.capabilities["logprobs"]:
            raise FlipgateError(
                f"model {self.model_id!r}: readout 'letter_logprob' needs capabilities.logprobs: "
                f"true (set it only if the provider returns logprobs)"
            )
        #: this process's calls: requests asked, attempts retried, attempts timed out, calls failed
        #: for good
        self.call_stats = {"requests": 0, "retries": 0, "timeouts": 0, "failures": 0}
        self.fingerprint = {
            "backend": "litellm",
            "source": shown or self.model,
            "api_base": self.api_base,
            "weights_sha256": f"api:{self.model}",
            "revision": None,
            "dtype": None,
            "quantization": None,
            "tokenizer_sha256": None,
            "chat_template_sha256": None,
            "capabilities": self.capabilities,
        }
        self.params = self.params_preview()
        self.settings = {
            "backend": "litellm",
            "model": self.model,
            "api_base": self.api_base,
            "decoding": self.params,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.decoding.get("temperature", 0.0),
            "readouts": sorted(self.readouts),
        }
        # present only when set, so the cache keys of entries without them stay as they were
        if self.answer_prefill:
            self.settings["answer_prefill"] = True
        if self.extra_body:
            self.settings["extra_body"] = self.extra_body
        if self.follow_redirects:  # answers may come from another host than api_base names
            self.settings["follow_redirects"] = True
            self.fingerprint["follow_redirects"] = True
        if self.server is not None:
            self._identify_server(self.server)
        else:
            self._identify_model(source)

    def _identify_model(self, source: dict[str, Any]) -> None:
        """Identity of an entry without a managed server (flipgate.backends.identity): declared in
        models.yaml, else asked of its server (``api_base``), else a hosted model's name. It keys
        the response cache (``settings``) and is the card's ``weights_sha256``. A hosted model's
        settings are left as they were (the model name is in them), so its cache stays warm."""
        identity = declared_identity(self.model, source)
        if identity is None and self._api_base:
            wait = min(self.timeout_s, PROBE_TIMEOUT_S)
            identity = server_identity(
                self.model, ask_server(self._api_base, self.model, self.headers(), wait)
            )
        if identity is None:
            identity = hosted_identity(self.model)
        else:
            self.settings["weights_sha256"] = identity.weights
        if identity.per_run:
            self.settings[PER_RUN] = True
        #: who answers, and how that was established
        self.identity = identity
        self.fingerprint.update(
            weights_sha256=identity.weights,
            revision=identity.revision,
            identity=identity.fingerprint(),
        )

    def _identify_server(self, server: ManagedServer) -> None:
        """Fingerprint and cache key of a started server: its engine, version, weights and
        settings, not its port (which changes every run)."""
        self.fingerprint.update(
            source=str(server.spec.model),
            api_base=None,
            weights_sha256=server.weights_sha256,
            quantization=server.quantization,
            dtype=server.spec.dtype if server.spec.engine == "transformers" else None,
            engine=server.engine,
            server={**server.spec.settings(), "answer_prefill": str(self.answer_prefill)},
        )
        self.settings.update(
            model=server.engine,
            api_base=None,
            weights_sha256=server.weights_sha256,
            server=server.settings,
        )

    @property
    def retries(self) -> int:
        """Retried attempts made by this process (reported by benchmarks and tests)."""
        return self.call_stats["retries"]

    @property
    def supports_images(self) -> bool:
        return bool(self.capabilities["images"])

    @property
    def measures_replicates(self) -> bool:
        """True: each request is its own API call (a served model computes every replicate of a
        same-ordering control, even at temperature 0; docs/definitions.md §12.5)."""
        return True

    # -- request building -----------------------------------------------------------------------
    def params_preview(self) -> dict[str, Any]:
        """Decoding parameters actually sent (after provider quirks); part of the cache key."""
        params = {k: v for k, v in self.decoding.items() if k not in self.unsupported}
        supported: Any = compatible_params(self.model) if self.client == "direct" else None
        if supported is None:
            try:
                supported = import_litellm().get_supported_openai_params(model=self.model) or []
            except Exception:  # unknown provider/model: send what was configured
                supported = []
        if supported:
            params = {k: v for k, v in params.items() if k in supported or k == "reasoning_effort"}
        return params

    def messages(self, request: Request) -> list[dict[str, Any]]:
        """The request's chat messages, images as data-URL parts, the answer prefix as the start
        of the assistant's turn where the entry prefills it."""
        messages = [
            {"role": role, "content": content_parts(text, request.images)}
            for role, text in request.messages
        ]
        if self.answer_prefill and request.answer_prefix:
            messages.append({"role": "assistant", "content": request.answer_prefix})
        return messages

    def request_params(self, request: Request) -> dict[str, Any]:
        """What a call asks beyond its messages, on either path: ``max_tokens``, the decoding
        parameters, log-probs where the letter_logprob readout reads them, the seed when
        sampling."""
        params: dict[str, Any] = {
            "max_tokens": request.max_new_tokens or self.max_new_tokens,
            **self.params,
        }
        if request.labels and self.capabilities["logprobs"] and "letter_logprob" in self.readouts:
            params.update(logprobs=True, top_logprobs=20)  # the most providers allow
        if (
            self.capabilities["seed"]
            and float(self.decoding.get("temperature", 0) or 0) > 0
            and "seed" not in self.unsupported
        ):
            params["seed"] = request.seed
        return params

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body the direct path posts: the served model name, the messages, the
        parameters (:meth:`request_params`), then ``extra_body`` merged in at the top level (as
        the OpenAI client litellm uses merges it)."""
        body = {
            "model": served_name(self.model),
            "messages": self.messages(request),
            **self.request_params(request),
        }
        body.update(self.extra_body)
        return body

    def kwargs(self, request: Request) -> dict[str, Any]:
        """litellm's ``acompletion`` arguments for ``request`` (the litellm path)."""
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages(request),
            "timeout": self.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
            **self.request_params(request),
        }
        if self.extra_body:
            kw["extra_body"] = self.extra_body
        if self._api_base:
            kw["api_base"] = self._api_base
        if self._api_key:
            kw["api_key"] = self._api_key
        if self._basic_auth:
            kw["extra_headers"] = {"Authorization": self._basic_auth}
            kw.setdefault("api_key", "unused")  # the client insists on one; the header replaces it
        return kw

    def headers(self) -> dict[str, str]:
        """The direct path's headers on every call: the key as a bearer token, or the
        ``api_base``'s ``user:password@`` as Basic auth in its place; none for a server without
        keys."""
        if self._basic_auth:
            return {"Authorization": self._basic_auth}
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def cost(self, tokens_in: int, tokens_out: int, response: Any = None) -> float:
        """USD of a call: at ``price``, else litellm's price map (on the litellm path from
        ``response`` when its usage is believed, else from the counts at :attr:`unit_price`); 0
        when unknown (flagged by the cost guard) or when the price map gives something
        impossible."""
        if self.price or self.client == "direct" or response is None:
            if self.unit_price is None:
                return 0.0
            usd = tokens_in * self.unit_price[0] + tokens_out * self.unit_price[1]
            return usd if math.isfinite(usd) and usd >= 0 else 0.0
        try:
            usd = float(import_litellm().completion_cost(completion_response=response))
        except Exception:  # not in the price map: unknown, counted as 0 and flagged by the guard
            return 0.0
        return usd if math.isfinite(usd) and usd >= 0 else 0.0

    # -- calls ---------------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        """``text`` without the key and without the credentials of any URL (the api_base's)."""
        return redact(text.replace(self._api_key, "***") if self._api_key else text)

    def _warn(self, kind: str, text: str) -> None:
        """A :class:`ReplyWarning` naming the model, once per ``kind`` for this model."""
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(
                self._redact(f"model {self.model_id!r} ({self.model}): {text}"),
                ReplyWarning,
                stacklevel=3,
            )

    def _output(self, resp: Any, request: Request, latency_s: float) -> Output:
        """The one place a reply is checked before it is used. One without a choice or text is
        malformed (:class:`BadReply`: the attempt is retried); otherwise its text is cut to what
        ``max_new_tokens`` allows, impossible log-probs are left out (letter_logprob then
        records a parse failure) and impossible or missing usage is replaced by the cost guard's
        conservative estimate, each noted on the output and warned once per model, not retried:
        a retry is billed and would most likely say the same."""
        choice = reply_choice(resp)
        max_tokens = int(request.max_new_tokens or self.max_new_tokens)
        notes: list[str] = []
        text = reply_text(choice)
        limit = MAX_CHARS_PER_TOKEN * max_tokens + len(request.answer_prefix)
        if len(text) > limit:
            self._warn(
                "text_cut",
                f"a reply of {len(text)} characters for max_new_tokens {max_tokens} (trial "
                f"{request.key}) was cut to {limit} ({MAX_CHARS_PER_TOKEN} a token), as is every "
                f"such reply of this model (noted 'text_cut' in its raw output)",
            )
            text = text[:limit]
            notes.append("text_cut")
        try:
            logprobs = label_logprobs(field(choice, "logprobs"), request.labels)
        except ImpossibleLogprobs as exc:
            self._warn(
                "logprobs_dropped",
                f"the server returned impossible log-probs ({exc}) for trial {request.key}; "
                f"they are not used: letter_logprob records a parse failure for every such "
                f"reply (noted 'logprobs_dropped' in its raw output)",
            )
            logprobs = {}
            notes.append("logprobs_dropped")
        usage = reply_usage(field(resp, "usage"), request, max_tokens)
        if isinstance(usage, str):
            n_in, n_out = estimate_tokens(request, max_tokens)
            self._warn(
                "usage_estimated",
                f"the server reported impossible usage ({usage}) for trial {request.key}; the "
                f"call is counted at the cost guard's conservative estimate ({n_in} tokens in, "
                f"{n_out} out) instead, as is every such reply (noted 'usage_estimated' in its "
                f"raw output)",
            )
            notes.append("usage_estimated")
            usd = self.cost(n_in, n_out)
        else:
            n_in, n_out = usage
            usd = self.cost(n_in, n_out, resp)
        return Output(text, logprobs, n_in, n_out, latency_s, usd, notes=notes)

    def _failure(self, exc: BaseException) -> Failure:
        """How a failed attempt is reported and whether it is retried: a malformed reply
        (:class:`BadReply`, also from inside the HTTP client) is retried; a redirect is refused
        at once, naming both hosts; otherwise as :func:`is_retriable`, with the Retry-After."""
        bad = bad_reply_in(exc)
        if bad is not None:
            return Failure(f"malformed reply: {bad}", f"malformed reply ({bad})", True)
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and 300 <= status < 400:
            location = redact(response_header(exc, "location") or "an unnamed address")
            here = host_of(self._api_base or "")
            there = host_of(location)
            where = f"another host, {there}" if there != here else f"{location} (the same host)"
            return Failure(
                f"the server at {here} redirected the call (HTTP {status}) to {where}; not "
                f"followed, so that answers come from the server the card names: point "
                f"source.api_base at it, or set follow_redirects: true",
                f"HTTP {status} redirect",
                False,
            )
        wait = retry_after_s(exc)
        hint = (
            f" (check the key in ${self.key_env})" if status in (401, 403) and self.key_env else ""
        )
        why = f"{type(exc).__name__} status={status}: {one_line(str(exc))}{hint}"
        if is_timeout(exc):
            brief = f"no reply within timeout_s {self.timeout_s:g} s"
        elif status is None:
            brief = f"{type(exc).__name__}: {one_line(str(exc), 60)}"
        else:
            brief = f"HTTP {status}" + (f", Retry-After {wait:g} s" if wait is not None else "")
        return Failure(why, brief, is_retriable(exc), wait)

    async def _one(self, request: Request, abort: asyncio.Event) -> Output | None:
        """One call, retried; None when ``abort`` (another call of the cell failed for good) is
        set before it is answered: no attempt starts after that, and a backoff wait ends. A wait
        the server asks for (Retry-After) longer than the attempts left may wait fails the call
        at once: sleeping it out would only hold the run."""
        if abort.is_set():  # never sent: not counted as a request
            return None
        ask = self._asker(request)
        stats = self.call_stats
        stats["requests"] += 1
        for attempt in range(1, self.max_attempts + 1):
            if abort.is_set():  # the backoff ended early: the cell has failed
                return None
            t0 = time.perf_counter()
            try:  # timeout_s bounds the whole attempt, not only each read (a trickling server)
                resp = await asyncio.wait_for(ask(), self.timeout_s)
                out = self._output(resp, request, time.perf_counter() - t0)
            except Exception as exc:  # classified below: retried, or a clear error naming the trial
                stats["timeouts"] += is_timeout(exc)
                if abort.is_set():
                    return None
                failure = self._failure(exc)
                left = self.max_attempts - attempt
                why = failure.why
                if failure.retriable and left and (failure.wait or 0) > left * self.max_delay_s:
                    why = (
                        f"{failure.brief}: the server asks to wait {failure.wait:g} s before the "
                        f"next attempt, longer than the {left} attempt(s) left may wait "
                        f"(retries.max_delay_s {self.max_delay_s:g} s each); not retried: run "
                        f"again later, or raise retries.max_delay_s"
                    )
                    left = 0
                if not failure.retriable or not left:
                    stats["failures"] += 1
                    raise FlipgateError(
                        self._redact(
                            f"model {self.model_id!r} ({self.model}): call failed after "
                            f"{attempt} attempt(s) for trial {request.key}: {why}"
                        )
                    ) from None
                self._stall.failed(f"{failure.brief}, {left} of {self.max_attempts} attempts left")
                wait = failure.wait
                if wait is None:
                    wait = random.uniform(
                        0, min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
                    )
                stats["retries"] += 1
                try:  # back off, unless the cell fails meanwhile
                    await asyncio.wait_for(abort.wait(), min(wait, self.max_delay_s))
                except asyncio.TimeoutError:
                    pass
                continue
            self._stall.answered()
            return out
        raise AssertionError("unreachable")

    async def _all(
        self,
        requests: list[Request],
        on_output: Callable[[int, Output], None] | None,
        on_wait: Callable[[str, float], None] | None = None,
    ) -> list[Output]:
        """Every request, sent in the order given (one item's orderings and replicates leave
        together, so a server's prefix cache can reuse their stem: docs/servers.md), at most
        ``concurrency`` in the air for this entry across the run's processes
        (:class:`~flipgate.backends.slots.Slots`). The first failure sets ``abort``: requests
        not yet sent are dropped, those in the air are awaited (and their answers handed to
        ``on_output``), then the failure is raised. Cancelling the requests in the air instead
        would not unsend them: the server could still answer (and bill) them after the error,
        uncached, and the resume would ask them again. ``on_wait`` is told what the calls wait
        on (:class:`Stall`)."""
        abort = asyncio.Event()
        results: list[Output | None] = [None] * len(requests)
        failures: list[Exception] = []
        self._stall = Stall(
            on_wait,
            f"waiting for a reply: timeout_s {self.timeout_s:g} s, {self.max_attempts} attempts",
        )
        if self.client == "direct":
            self._open_direct()
        else:
            self._sdk = self._openai_client(requests)
        slots = self._endpoint_slots()
        slots.reset_stats()
        todo = iter(enumerate(requests))

        async def sender() -> None:
            """Takes the next request once a slot is free, until none is left or one failed."""
            while not abort.is_set():
                await slots.acquire()
                try:
                    nxt = next(todo, None)
                    if nxt is None or abort.is_set():
                        return
                    i, request = nxt
                    out = await self._one(request, abort)
                except Exception as exc:  # the first one is raised once every call has ended
                    failures.append(exc)
                    abort.set()
                    return
                finally:
                    slots.release()
                if out is None:
                    continue
                results[i] = out
                if on_output is not None:
                    try:
                        on_output(i, out)
                    except Exception as exc:
                        failures.append(exc)
                        abort.set()

        tasks = [
            asyncio.ensure_future(sender()) for _ in range(min(self.concurrency, len(requests)))
        ]
        try:
            await asyncio.gather(*tasks)
        except GeneratorExit:  # closed unfinished after a Ctrl-C ended its loop: that loop is
            raise  # closed, so nothing can be cancelled or awaited any more
        except BaseException:  # cancelled from outside (Ctrl-C): end the requests in the air
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._close_client()
            raise
        finally:
            slots.close()
        await self._close_client()
        if failures:
            raise failures[0]
        return results  # type: ignore[return-value]

    def _asker(self, request: Request) -> Callable[[], Awaitable[Any]]:
        """One attempt at ``request``'s call, on this entry's path: the direct client's POST, or
        litellm's ``acompletion``."""
        if self.client == "direct":
            assert self._loop.direct is not None
            body, client = self.body(request), self._loop.direct
            limit = reply_bytes(int(request.max_new_tokens or self.max_new_tokens))
            return lambda: client.chat(body, limit)
        kw = self.kwargs(request)
        if self._sdk is not None:
            kw["client"] = self._sdk
        acompletion = import_litellm().acompletion
        return lambda: acompletion(**kw)

    def _open_direct(self) -> None:
        """The direct client for :attr:`_api_base`, kept across calls (its connections stay
        open); made anew when the address changed (a restarted server) or the calls run on
        another event loop."""
        assert self._api_base is not None
        direct = self._loop.direct
        if (
            direct is not None
            and direct.loop is asyncio.get_running_loop()
            and direct.url.startswith(self._api_base.rstrip("/") + "/")
        ):
            return
        self._loop.direct = DirectClient(
            self._api_base, self.headers(), self.concurrency, self.follow_redirects
        )
        if direct is not None:
            self._loop.closing.append(direct)

    def _endpoint_slots(self) -> Slots:
        """The bound on this entry's requests in flight: ``concurrency`` for the whole run, all
        pytest-xdist workers together (docs/configuration.md, "concurrency")."""
        key = f"{self.model_id} {redact(self._api_base or self.model)}"
        if self._slots is None or self._slots_key != key:
            self._slots = Slots(key, self.concurrency, run_slots_dir())
            self._slots_key = key
        return self._slots

    def mean_in_flight(self) -> float | None:
        """The mean number of this process's requests in flight during the current (or last)
        :meth:`complete` (for the progress line); None before the first."""
        return None if self._slots is None else self._slots.mean_in_flight()

    def _openai_client(self, requests: list[Request]) -> Any:
        """The client of this batch's litellm calls (:func:`openai_client`) when the entry is an
        OpenAI-compatible server (``api_base``, or a server flipgate started) that does not take
        the direct path; None otherwise (a hosted provider: litellm's own client). Its body
        limit is the largest call's."""
        if not self._api_base or self.model.split("/", 1)[0] != "openai":
            return None
        most = max((r.max_new_tokens or self.max_new_tokens for r in requests), default=0)
        return openai_client(
            self._api_base,
            self._api_key,
            self.timeout_s,
            reply_bytes(max(most, self.max_new_tokens)),
            self.follow_redirects,
        )

    async def _close_client(self) -> None:
        client, self._sdk = self._sdk, None
        if client is not None:
            await client.close()
        while self._loop.closing:
            await self._loop.closing.pop().close()

    def complete(
        self,
        requests: list[Request],
        on_output: Callable[[int, Output], None] | None = None,
        on_wait: Callable[[str, float], None] | None = None,
    ) -> list[Output]:
        if self.server is not None and requests:
            self._api_base = self.server.base_url()
        runner = self._loop.runner()
        try:
            return runner.run(self._all(requests, on_output, on_wait))
        except BaseException:
            end_every_task(runner.get_loop())
            self.close()  # a stopped batch leaves no connection or loop behind
            raise

    def close(self) -> None:
        """End the direct client's connections and the event loop kept for the calls (also done
        when the backend is collected, or at exit)."""
        self._loop.close()


class CallLoop:
    """The event loop an API backend's calls run on, kept from one :meth:`LiteLLMBackend.complete`
    to the next so that the direct client's keep-alive connections (bound to the loop) serve
    every call of the process; and the clients to close on it before it ends. Closed when the
    backend is (or at exit: no "Unclosed client session" warning)."""

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        #: the direct path's client (made on this loop, by the first call)
        self.direct: DirectClient | None = None
        #: direct clients replaced (a restarted server's new address), to close before the loop ends
        self.closing: list[DirectClient] = []

    def runner(self) -> asyncio.Runner:
        if self._runner is None:
            self._runner = asyncio.Runner(loop_factory=whole_event_loop)
        return self._runner

    def close(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop runs in this thread: this one can run here
            self._close()
            return
        # collected while another loop runs in this thread (the garbage collector calls the
        # finaliser anywhere): this loop can only run in a thread of its own
        ender = threading.Thread(target=self._close, name="flipgate-close-calls")
        ender.start()
        ender.join()

    def _close(self) -> None:
        runner, self._runner = self._runner, None
        closing, self.closing = self.closing, []
        if self.direct is not None:
            closing.append(self.direct)
            self.direct = None
        for client in closing:
            try:
                client.end()  # on the loop it was made in (this one, or one a test ran)
            except Exception:  # noqa: S112 (ending anyway: a client that fails to close is dropped)
                continue
        if runner is not None:
            runner.close()


#: the signals a Ctrl-C or a stop sends (flipgate.interrupts raises KeyboardInterrupt on them)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def whole_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop, made whole before a stop signal is handled: a KeyboardInterrupt raised
    inside the loop's constructor leaves a half-made loop whose finaliser prints a traceback
    ("Exception ignored in: BaseEventLoop.__del__ ... no attribute '_debug'"; seen when the
    second Ctrl-C of an xdist run hit a worker there). While the loop is made, a stop signal is
    only noted (Python runs signal handlers in the main thread; elsewhere the loop is made as
    usual); then the handlers are put back and a noted signal goes to its own, with the finished
    loop closed if that handler raises."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.new_event_loop()
    noted: list[tuple[int, Any]] = []
    handlers = {s: signal.signal(s, lambda n, f: noted.append((n, f))) for s in STOP_SIGNALS}
    try:
        loop = asyncio.new_event_loop()
    finally:
        for stop, handler in handlers.items():
            signal.signal(stop, handler)
    try:
        for signum, frame in noted:
            handler = handlers[signal.Signals(signum)]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)
    except BaseException:
        loop.close()
        raise
    return loop


#: how many times :func:`end_every_task` cancels what is still pending before it gives up
END_ROUNDS = 10


def end_every_task(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task still pending on ``loop`` and run it until they have ended, before it
    closes. A Ctrl-C raised inside one request's task (where the signal handler found the process)
    is raised again in the request that awaited it while the batch ends; ``asyncio.run``'s own
    clean-up stops at that and leaves the other requests pending, which Python then reports one
    by one ("Task was destroyed but it is pending!"). Here such a re-raise only starts another
    round; the caller raises the first interrupt."""
    for _ in range(END_ROUNDS):
        pending = asyncio.all_tasks(loop)
        if not pending:
            return
        for task in pending:
            task.cancel()
        try:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        except BaseException:  # noqa: S112 (the interrupt that is being raised: end the rest)
            continue
