"""litellm backend: closed and hosted models (OpenAI, Anthropic, Gemini, any OpenAI-compatible
server).

Async calls under a concurrency limit; retries with exponential backoff and full jitter on 429,
5xx, timeouts and connection errors, honouring Retry-After; other errors (401, 400, ...) fail at
once. Each finished output is handed to ``on_output`` as it returns, so the caller can cache it
and an interruption loses nothing already answered; when one call fails for good, no new attempt
starts and the calls already in the air are awaited (their answers handed over too) before the
error surfaces, so no call outlives its cell and a resume never repeats an answered call. The API
key is read from the environment variable named in ``source.api_key_env`` and never stored, logged
or put in an error message; credentials in ``source.api_base`` (``user:password@``, ``?api_key=``)
are used for the calls only: settings, fingerprint and messages carry the redacted URL.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import math
import os
import random
import signal
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable

from flipgate import FlipgateError
from flipgate.backends.base import Output, Request
from flipgate.backends.identity import (
    PER_RUN,
    PROBE_TIMEOUT_S,
    ModelIdentity,
    ask_server,
    declared_identity,
    hosted_identity,
    server_identity,
)
from flipgate.backends.servers import ManagedServer
from flipgate.backends.source import public_source
from flipgate.files import user_cache_dir
from flipgate.redact import redact, refuse_key_as_name

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled price map, no download


def import_litellm():
    """litellm, imported only after ``LITELLM_LOCAL_MODEL_COST_MAP`` is set (this module sets it on
    import), so litellm reads its bundled price map instead of fetching one from the network."""
    import litellm

    return litellm


RETRIABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
DEFAULT_CAPABILITIES = {"logprobs": False, "images": False, "seed": False}


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After: seconds or an HTTP date), if it did."""
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        value = headers.get("retry-after") if headers is not None else None
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_tz(value)
            if parsed is not None:
                return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    return None


def is_timeout(exc: BaseException) -> bool:
    import litellm

    return isinstance(exc, (litellm.Timeout, asyncio.TimeoutError))


def is_retriable(exc: BaseException) -> bool:
    import litellm

    if is_timeout(exc) or isinstance(exc, litellm.APIConnectionError):
        return True
    return getattr(exc, "status_code", None) in RETRIABLE_STATUS


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


def label_logprobs(logprobs: Any, labels: tuple[str, ...]) -> dict[str, float]:
    """Log-probs of each label from ``top_logprobs`` at the answer position: the first generated
    token that is a label (" B", "(B", "B"), else the first position with a label among its
    alternatives; spellings of one label are summed."""
    if not labels or logprobs is None:
        return {}
    content = getattr(logprobs, "content", None) or (
        logprobs.get("content") if isinstance(logprobs, dict) else None
    )

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key)

    def at(position: Any) -> dict[str, float]:
        found: dict[str, list[float]] = {}
        for top in get(position, "top_logprobs") or []:
            label = get(top, "token").strip(" (*")
            if label in labels:
                found.setdefault(label, []).append(float(get(top, "logprob")))
        return {k: math.log(sum(math.exp(v) for v in vs)) for k, vs in found.items()}

    positions = content or []
    for position in positions:
        if get(position, "token").strip(" (*") in labels:
            return at(position)
    return next((found for found in map(at, positions) if found), {})


class LiteLLMBackend:
    """One models.yaml entry with ``backend: litellm``."""

    streams_outputs = True

    def __init__(self, cfg: dict[str, Any]):
        import litellm

        litellm.suppress_debug_info = True
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
            self._api_key = "no-key"  # the OpenAI client insists on one; the server wants none
        #: the answer prefix sent as the start of the assistant's reply, which the model
        #: continues (as the hf backend does); for servers that continue a final assistant
        #: message (llama.cpp's does; vLLM and SGLang with extra_body continue_final_message)
        default_prefill = self.server is not None and self.server.spec.engine == "llama.cpp"
        self.answer_prefill = bool(cfg.get("answer_prefill", default_prefill))
        self.extra_body: dict[str, Any] = dict(cfg.get("extra_body") or {})
        self.timeout_s = float(cfg.get("timeout_s", 120.0))
        self.price = cfg.get("price")
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
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            if self._basic_auth:
                headers["Authorization"] = self._basic_auth
            wait = min(self.timeout_s, PROBE_TIMEOUT_S)
            identity = server_identity(
                self.model, ask_server(self._api_base, self.model, headers, wait)
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
        try:
            import litellm

            supported = litellm.get_supported_openai_params(model=self.model) or []
        except Exception:  # unknown provider/model: send what was configured
            supported = []
        if supported:
            params = {k: v for k, v in params.items() if k in supported or k == "reasoning_effort"}
        return params

    def kwargs(self, request: Request) -> dict[str, Any]:
        messages = [
            {"role": role, "content": content_parts(text, request.images)}
            for role, text in request.messages
        ]
        if self.answer_prefill and request.answer_prefix:
            messages.append({"role": "assistant", "content": request.answer_prefix})
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "timeout": self.timeout_s,
            "max_tokens": request.max_new_tokens or self.max_new_tokens,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
            **self.params,
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
        if request.labels and self.capabilities["logprobs"] and "letter_logprob" in self.readouts:
            kw.update(logprobs=True, top_logprobs=20)  # the most providers allow
        if (
            self.capabilities["seed"]
            and float(self.decoding.get("temperature", 0) or 0) > 0
            and "seed" not in self.unsupported
        ):
            kw["seed"] = request.seed
        return kw

    def cost(self, tokens_in: int, tokens_out: int, response: Any = None) -> float:
        if self.price:
            return (
                tokens_in * self.price.get("input_per_mtok", 0.0)
                + tokens_out * self.price.get("output_per_mtok", 0.0)
            ) / 1e6
        try:
            import litellm

            return float(litellm.completion_cost(completion_response=response))
        except (
            Exception
        ):  # not in the price map: unknown, counted as 0 and flagged by the cost guard
            return 0.0

    # -- calls ---------------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        """``text`` without the key and without the credentials of any URL (the api_base's)."""
        return redact(text.replace(self._api_key, "***") if self._api_key else text)

    async def _one(self, request: Request, abort: asyncio.Event) -> Output | None:
        """One call, retried; None when ``abort`` (another call of the cell failed for good) is
        set before it is answered: no attempt starts after that, and a backoff wait ends."""
        import litellm

        if abort.is_set():  # never sent: not counted as a request
            return None
        kw = self.kwargs(request)
        stats = self.call_stats
        stats["requests"] += 1
        for attempt in range(1, self.max_attempts + 1):
            if abort.is_set():  # the backoff ended early: the cell has failed
                return None
            t0 = time.perf_counter()
            try:  # timeout_s bounds the whole attempt, not only each read (a trickling server)
                resp = await asyncio.wait_for(litellm.acompletion(**kw), self.timeout_s)
                choice = resp.choices[0]
                text = choice.message.content or ""
            except Exception as exc:  # classified below: retried, or a clear error naming the trial
                status = getattr(exc, "status_code", None)
                stats["timeouts"] += is_timeout(exc)
                if abort.is_set():
                    return None
                if not is_retriable(exc) or attempt == self.max_attempts:
                    stats["failures"] += 1
                    hint = (
                        f" (check the key in ${self.key_env})"
                        if status in (401, 403) and self.key_env
                        else ""
                    )
                    raise FlipgateError(
                        self._redact(
                            f"model {self.model_id!r} ({self.model}): call failed after "
                            f"{attempt} attempt(s) for trial "
                            f"{request.key}: {type(exc).__name__} status={status}: "
                            f"{str(exc)[:300]}{hint}"
                        )
                    ) from None
                wait = retry_after_s(exc)
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
            usage = getattr(resp, "usage", None)
            n_in = int(getattr(usage, "prompt_tokens", 0) or 0)
            n_out = int(getattr(usage, "completion_tokens", 0) or 0)
            return Output(
                text,
                label_logprobs(getattr(choice, "logprobs", None), request.labels),
                n_in,
                n_out,
                time.perf_counter() - t0,
                self.cost(n_in, n_out, resp),
            )
        raise AssertionError("unreachable")

    async def _all(
        self, requests: list[Request], on_output: Callable[[int, Output], None] | None
    ) -> list[Output]:
        """Every request, at most ``concurrency`` in the air. The first failure sets ``abort``:
        requests not yet sent are dropped, those in the air are awaited (and their answers handed
        to ``on_output``), then the failure is raised. Cancelling the requests in the air instead
        would not unsend them: the server could still answer (and bill) them after the error,
        uncached, and the resume would ask them again."""
        gate = asyncio.Semaphore(self.concurrency)
        abort = asyncio.Event()
        results: list[Output | None] = [None] * len(requests)
        failures: list[Exception] = []

        async def run(i: int, request: Request) -> None:
            try:
                async with gate:
                    out = await self._one(request, abort)
                if out is not None:
                    results[i] = out
                    if on_output is not None:
                        on_output(i, out)
            except Exception as exc:  # the first one is raised once every call has ended
                failures.append(exc)
                abort.set()

        tasks = [asyncio.ensure_future(run(i, r)) for i, r in enumerate(requests)]
        try:
            await asyncio.gather(*tasks)
        except GeneratorExit:  # closed unfinished after a Ctrl-C ended its loop: that loop is
            raise  # closed, so nothing can be cancelled or awaited any more
        except BaseException:  # cancelled from outside (Ctrl-C): end the requests in the air
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if failures:
            raise failures[0]
        return results  # type: ignore[return-value]

    def complete(
        self, requests: list[Request], on_output: Callable[[int, Output], None] | None = None
    ) -> list[Output]:
        if self.server is not None and requests:
            self._api_base = self.server.base_url()
        with asyncio.Runner(loop_factory=whole_event_loop) as runner:
            try:
                return runner.run(self._all(requests, on_output))
            except BaseException:
                end_every_task(runner.get_loop())
                raise


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
