"""The backend interface: rendered requests in, raw outputs + readouts out, batched.

A backend knows nothing of facets. It returns the generated text and, where it can, the
log-probabilities of each candidate label at the answer position.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeGuard

from flipgate.hashing import sha256_bytes, sha256_text


@dataclass(frozen=True)
class Request:
    """One model call. ``messages`` are chat messages; ``answer_prefix`` is the assistant text the
    answer follows ("Answer:"); ``labels`` are the candidate labels for the letter readout;
    ``key`` is the trial identity (dataset, item_id, facet, condition, sample) for replay;
    ``max_new_tokens`` overrides the model's default (free-form answers need more);
    ``images`` are encoded images, one per "<image>" placeholder in the messages, in order;
    ``audios`` WAV clips, one per "<audio>" placeholder (audio-language models);
    ``continuations``, one per label, are strings whose likelihood after the answer prefix the
    backend also scores where it can (the cloze readout, docs/definitions.md §8)."""

    messages: tuple[tuple[str, str], ...]
    answer_prefix: str = "Answer:"
    labels: tuple[str, ...] = ()
    seed: int = 0
    key: tuple = ()
    max_new_tokens: int | None = None
    images: tuple[bytes, ...] = ()
    continuations: tuple[str, ...] = ()
    audios: tuple[bytes, ...] = ()


#: the notes an :class:`Output` may carry: its text was cut to what ``max_new_tokens`` allows;
#: its log-probs were impossible (NaN, +inf, above 0) and left out; its token counts (and so its
#: cost) are flipgate's conservative estimate, the server's usage being impossible or missing
REPLY_NOTES = ("text_cut", "logprobs_dropped", "usage_estimated")


@dataclass
class Output:
    """A backend's answer to one request; ``continuation_logprobs``: per label, the mean
    log-probability per token of the request's continuation for it (empty when not asked or not
    available); ``notes``: what the backend changed in a reply it could not use as it came
    (:data:`REPLY_NOTES`), kept with the trial's raw output so that a cut text or an estimated
    cost is never mistaken for what the server said."""

    text: str
    label_logprobs: dict[str, float] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    continuation_logprobs: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "label_logprobs": self.label_logprobs,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "latency_s": self.latency_s,
            "cost_usd": self.cost_usd,
        }
        if self.continuation_logprobs:  # absent otherwise: older outputs keep their JSON
            out["continuation_logprobs"] = self.continuation_logprobs
        if self.notes:  # likewise
            out["notes"] = self.notes
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Output":
        return cls(
            d.get("text", ""),
            dict(d.get("label_logprobs") or {}),
            int(d.get("tokens_in", 0)),
            int(d.get("tokens_out", 0)),
            float(d.get("latency_s", 0.0)),
            float(d.get("cost_usd", 0.0)),
            dict(d.get("continuation_logprobs") or {}),
            list(d.get("notes") or ()),
        )


class Backend(Protocol):
    """What every backend provides."""

    model_id: str
    #: receipt fields for the GRID card (weights sha256, revision, dtype, ...)
    fingerprint: dict[str, Any]
    #: settings that change outputs; part of the cache key
    settings: dict[str, Any]
    #: requests handed to one :meth:`complete` call by the runner
    batch_size: int

    @property
    def call_stats(self) -> dict[str, int] | None:
        """This process's API call counts (requests, retries, timeouts, failures); None for a
        backend that makes no API calls."""
        ...

    @property
    def supports_images(self) -> bool:
        """Whether the model takes images (an image facet is not measured otherwise)."""
        ...

    @property
    def measures_replicates(self) -> bool:
        """Whether K requests with the same input (a same-ordering control's replicates: the
        canonical ordering K times, each with its own seed; docs/definitions.md §3.6) are answered
        by K separate computations, so that the control measures a noise floor. False for a
        backend that computes an identical input once and copies the answer (greedy decoding
        with reused answers): its control's floor is 0 by construction, not measured, and the
        control's thresholds are not applicable (docs/definitions.md §12.5). A backend that does
        not declare it measures (:func:`measures_replicates`)."""
        ...

    def complete(self, requests: list[Request]) -> list[Output]: ...


class StreamingBackend(Backend, Protocol):
    """A backend that hands each output to ``on_output(index, output)`` as it arrives, and tells
    ``on_wait(reason, since)`` what its calls are waiting on (the last refusal or timeout, or
    none yet) and since when (Unix time) no answer came, so the live progress can say why a run
    does not progress (flipgate/progress.py)."""

    streams_outputs: bool

    def complete(
        self,
        requests: list[Request],
        on_output: Callable[[int, Output], None] | None = None,
        on_wait: Callable[[str, float], None] | None = None,
    ) -> list[Output]: ...


def is_streaming(backend: Backend) -> TypeGuard[StreamingBackend]:
    """Whether ``backend`` declares ``streams_outputs`` (and so takes ``on_output``)."""
    return bool(getattr(backend, "streams_outputs", False))


def measures_replicates(backend: Backend) -> bool:
    """:attr:`Backend.measures_replicates`; True for a backend that does not declare it (a test
    double, a backend written before it existed): each request is its own computation."""
    return bool(getattr(backend, "measures_replicates", True))


def prompt_sha256(request: Request) -> str:
    """sha256 of what the model was shown: messages, answer prefix and each image's (and audio
    clip's) sha256."""
    images = [sha256_bytes(im) for im in request.images]
    shown: list[object] = [request.messages, request.answer_prefix, images]
    if request.audios:  # only then: every other prompt hash stays as it was
        shown.append([sha256_bytes(a) for a in request.audios])
    return sha256_text(json.dumps(shown))


#: conservative request-size estimate: prompt characters per token (English text runs ~4)
CHARS_PER_TOKEN = 2
#: tokens allowed per chat message (role and template overhead) and per image
TOKENS_PER_MESSAGE = 8
TOKENS_PER_IMAGE = 2000


def prompt_chars(request: Request) -> int:
    return sum(len(text) for _, text in request.messages) + len(request.answer_prefix)


def estimate_tokens(request: Request, max_out: int) -> tuple[int, int]:
    """A conservative (input, output) token count for one call, before making it: 1 token per
    ``CHARS_PER_TOKEN`` prompt characters plus allowances per message and image, and the request's
    whole output budget (``max_out`` when the request sets none). The cost guard prices calls
    with it (flipgate.cost); an API backend checks a server's usage against it
    (flipgate.backends.api)."""
    tokens_in = (
        math.ceil(prompt_chars(request) / CHARS_PER_TOKEN)
        + TOKENS_PER_MESSAGE * len(request.messages)
        + TOKENS_PER_IMAGE * len(request.images)
    )
    return tokens_in, int(request.max_new_tokens or max_out)
