"""The direct client of an OpenAI-compatible chat server (vLLM, SGLang, TGI, llama.cpp, ollama,
a server flipgate started): one pooled aiohttp session per endpoint, JSON built and parsed once.

litellm's wrapper costs several ms of CPU a request (7–10 here: building the request, pricing each
reply, logging callbacks; docs/engine.md, "The API client"); against a served model that, not the
server, limits a run. This client sends the body an OpenAI-compatible server reads and parses the
reply into plain dicts (what :mod:`flipgate.backends.api` checks), nothing else; retries,
timeouts, redaction, the reply checks and the cost stay in :class:`~flipgate.backends.api.
LiteLLMBackend`, shared with the litellm path.

Which entries take it is :func:`direct_prefix`: ``source.model`` ``openai/<name>`` or
``hosted_vllm/<name>`` with an ``api_base`` (or a ``server:`` flipgate starts), unless the entry
sets ``client: litellm``. Hosted providers (no ``api_base``: OpenAI's reasoning models take other
parameters, Anthropic, Bedrock, Vertex, ...) stay on litellm, which translates for them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

#: the ``source.model`` prefixes whose requests are OpenAI chat completions as sent (litellm's
#: own translation for them changes nothing for a served model)
DIRECT_PREFIXES = ("openai", "hosted_vllm")
#: the reply body read in one piece when the server says its length; otherwise it is read in
#: chunks of this size, counted against the call's limit
CHUNK_BYTES = 1 << 16
#: the most of an error reply's body read for its message
ERROR_BYTES = 1 << 16


class BadReply(Exception):
    """A reply that cannot be used at all (no choices, no text, a body larger than the call
    allows, a 2xx body that is not a JSON object): malformed, so retried like a 5xx
    (docs/configuration.md), and one error line when the retries run out."""


class HTTPStatusError(Exception):
    """A reply with a status other than 2xx: ``status_code``, its ``headers`` (Retry-After,
    Location) and the server's message (its JSON ``error.message``, else the body's start)."""

    def __init__(self, status: int, headers: Any, message: str):
        super().__init__(f"HTTP {status}: {message}" if message else f"HTTP {status}")
        self.status_code = status
        self.headers = headers


def too_large(limit: int) -> str:
    """Why a reply body past ``limit`` bytes is not read on."""
    return (
        f"the reply body is larger than {limit} bytes, more than max_new_tokens allows; it was "
        f"not read on"
    )


def direct_prefix(model: str, at_server: bool, client: str | None) -> bool:
    """Whether an entry's calls take the direct client: an OpenAI-compatible prefix
    (:data:`DIRECT_PREFIXES`) at a server (``api_base``, or one flipgate starts), and no
    ``client: litellm``."""
    if client == "litellm" or not at_server:
        return False
    return model.split("/", 1)[0] in DIRECT_PREFIXES


def error_message(body: bytes) -> str:
    """The server's words in an error reply: ``error.message`` (or ``detail``, ``message``) of a
    JSON body, else its start."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:300].decode("utf-8", "replace")
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for name in ("error", "detail", "message"):
            if isinstance(data.get(name), str):
                return str(data[name])
    return json.dumps(data)[:300]


class DirectClient:
    """POSTs to ``{api_base}/chat/completions`` with keep-alive connections, at most
    ``connections`` open; ``headers`` go on every call (the key's ``Authorization``). A redirect is
    followed only when ``follow_redirects`` (else its 3xx is an :class:`HTTPStatusError` naming
    the new ``Location``). Made and closed inside one event loop (aiohttp's session is bound to
    it)."""

    def __init__(
        self, api_base: str, headers: dict[str, str], connections: int, follow_redirects: bool
    ):
        self.url = api_base.rstrip("/") + "/chat/completions"
        #: the event loop the session is bound to (made inside it)
        self.loop = asyncio.get_running_loop()
        self.follow_redirects = follow_redirects
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max(1, connections), limit_per_host=0),
            headers={"Content-Type": "application/json", **headers},
            timeout=aiohttp.ClientTimeout(total=None),  # the backend bounds each attempt itself
            skip_auto_headers=("User-Agent",),
        )

    async def chat(self, body: dict[str, Any], limit: int) -> dict[str, Any]:
        """The server's reply to ``body`` as a dict; :class:`HTTPStatusError` for a status other
        than 2xx, :class:`BadReply` for a body past ``limit`` bytes or a 2xx body that is not a JSON
        object; aiohttp's errors for a connection that fails."""
        async with self.session.post(
            self.url,
            data=json.dumps(body, ensure_ascii=False).encode(),
            allow_redirects=self.follow_redirects,
        ) as resp:
            if not 200 <= resp.status < 300:  # its words, as much as a message needs
                said = await resp.content.read(ERROR_BYTES)
                raise HTTPStatusError(resp.status, resp.headers, error_message(said))
            raw = await self._read(resp, limit)
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise BadReply(f"the reply is not JSON ({exc})") from None
        if not isinstance(reply, dict):
            raise BadReply(f"the reply is a JSON {type(reply).__name__}, not an object")
        return reply

    @staticmethod
    async def _read(resp: aiohttp.ClientResponse, limit: int) -> bytes:
        """The body, read no further than ``limit`` bytes."""
        length = resp.content_length
        if length is not None and length > limit:
            raise BadReply(too_large(limit))
        if length is not None:
            return await resp.read()
        chunks, seen = [], 0
        async for chunk in resp.content.iter_chunked(CHUNK_BYTES):
            seen += len(chunk)
            if seen > limit:
                raise BadReply(too_large(limit))
            chunks.append(chunk)
        return b"".join(chunks)

    async def close(self) -> None:
        await self.session.close()

    def end(self) -> None:
        """Close the session from outside its loop: run there when the loop can still run, else
        (a Ctrl-C closed it under a call) mark it closed, its connections gone with the loop."""
        if self.session.closed:
            return
        if self.loop.is_closed():
            self.session.detach()
        else:
            self.loop.run_until_complete(self.close())
