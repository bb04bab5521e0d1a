"""Who answers a ``litellm`` entry: the model identity that keys its response cache and that the
card shows as ``weights_sha256`` (docs/servers.md, "Model identity").

A cached answer may only be reused when the model is provably the one that gave it. In order of
precedence:

1. **declared** in models.yaml: ``source.weights`` (e.g. the GGUF's sha256) and/or
   ``source.revision``; the user's word wins and the server is not asked;
2. **the server's own word**, for an entry with ``source.api_base``: llama.cpp's ``GET /props``
   (``model_path``, ``build_info``) and ``GET {api_base}/models`` (the listed model's ``id``, and
   vLLM's ``root``/``parent``/``revision`` or llama.cpp's ``meta``: parameter count, size, vocab);
3. an endpoint that says nothing of its weights (no ``/props``, a model list that only repeats
   the configured name, nothing declared) is **unverified**: its cache is keyed on the run id
   (:func:`cache_settings`), so answers are reused within the run (workers, a resume) and never
   across runs;
4. a **hosted provider** (no ``api_base``) is known by its model name, as the provider publishes
   it (pin a dated name, or declare ``source.revision`` to start a fresh cache).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from flipgate.hashing import sha256_json

#: how long each identity request may take (the server is local or near; it answers at once)
PROBE_TIMEOUT_S = 5.0
#: at most this much of a reply is read
MAX_REPLY_BYTES = 1 << 20
#: the identity of an endpoint that cannot say who it is: what the card shows
UNVERIFIED = "unverified: per-run cache"
#: settings key that marks a cache as per-run (:func:`cache_settings`)
PER_RUN = "per_run_cache"
#: fields of a listed model that name its weights (``created`` and the serving context change on
#: every start and are left out)
MODEL_FIELDS = ("id", "root", "parent", "revision", "meta")
VOLATILE_META = ("n_ctx",)
PROPS_FIELDS = ("model_path", "build_info")


@dataclass(frozen=True)
class ModelIdentity:
    """``weights``: what the card's ``weights_sha256`` shows and the cache keys on; ``how``: how
    it was established; ``evidence``: what the server said; ``per_run``: no cross-run reuse."""

    weights: str
    how: str
    evidence: dict[str, Any] = field(default_factory=dict)
    revision: str | None = None
    per_run: bool = False

    def fingerprint(self) -> dict[str, Any]:
        """The identity as the backend's fingerprint records it (in the trials store)."""
        out: dict[str, Any] = {"how": self.how, "per_run_cache": self.per_run}
        if self.evidence:
            out["evidence"] = self.evidence
        return out


def served_name(model: str) -> str:
    """The name a litellm model id asks the server for: ``openai/m`` -> ``m``."""
    return model.split("/", 1)[1] if "/" in model else model


def declared_identity(model: str, source: dict[str, Any]) -> ModelIdentity | None:
    """The identity models.yaml declares (``source.weights``, ``source.revision``), if any."""
    weights, revision = source.get("weights"), source.get("revision")
    if weights is None and revision is None:
        return None
    how = " and ".join(
        f"declared source.{k}" for k, v in (("weights", weights), ("revision", revision)) if v
    )
    return ModelIdentity(
        str(weights) if weights is not None else f"declared:{model}@{revision}",
        how,
        revision=revision,
    )


def hosted_identity(model: str) -> ModelIdentity:
    """A hosted provider's model: its name is all it says before a call."""
    return ModelIdentity(f"api:{model}", "hosted provider: model name")


def _url(base: str, path: str) -> str:
    """``base`` (an OpenAI ``.../v1`` root, perhaps with a query) with ``path`` appended."""
    parts = urllib.parse.urlsplit(base)
    return parts._replace(path=parts.path.rstrip("/") + path).geturl()


def _get_json(url: str, headers: dict[str, str], timeout_s: float) -> Any:
    """The JSON reply of ``GET url``, or None when there is none (no route, not JSON, refused,
    timed out): an endpoint that does not answer says nothing of itself."""
    request = urllib.request.Request(url, headers={"Accept": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            return json.loads(reply.read(MAX_REPLY_BYTES))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _listed_model(listing: Any, name: str) -> dict[str, Any]:
    """The entry of an OpenAI ``/models`` listing that serves ``name`` (the only one when the
    server lists one), reduced to the fields that name its weights."""
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    chosen = next((e for e in entries if e.get("id") == name), None)
    if chosen is None and len(entries) == 1:
        chosen = entries[0]
    if chosen is None:
        return {}
    out = {k: chosen[k] for k in MODEL_FIELDS if chosen.get(k) not in (None, "", {}, [])}
    if isinstance(out.get("meta"), dict):
        out["meta"] = {k: v for k, v in out["meta"].items() if k not in VOLATILE_META}
    return out


def ask_server(
    api_base: str, model: str, headers: dict[str, str], timeout_s: float = PROBE_TIMEOUT_S
) -> dict[str, Any]:
    """What an OpenAI-compatible server at ``api_base`` says about the model it serves: llama.cpp's
    ``/props`` (at the server root) and the ``/models`` listing's entry for ``model``."""
    evidence: dict[str, Any] = {}
    root = api_base.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    props = _get_json(_url(root, "/props"), headers, timeout_s)
    if isinstance(props, dict):
        found = {k: props[k] for k in PROPS_FIELDS if props.get(k)}
        if found:
            evidence["props"] = found
    listed = _listed_model(
        _get_json(_url(api_base, "/models"), headers, timeout_s), served_name(model)
    )
    if listed:
        evidence["model"] = listed
    return evidence


def server_identity(model: str, evidence: dict[str, Any]) -> ModelIdentity:
    """The identity of a self-hosted entry from what its server said (:func:`ask_server`);
    unverified when that names no weights (no ``/props`` model path, no root, revision or
    metadata, and no model id other than the configured name)."""
    listed = evidence.get("model", {})
    names_weights = bool(
        evidence.get("props", {}).get("model_path")
        or any(k in listed for k in ("root", "parent", "revision", "meta"))
        or listed.get("id", served_name(model)) != served_name(model)
    )
    if not names_weights:
        return ModelIdentity(
            UNVERIFIED,
            "unverified: the server names no weights (no /props, /models gives only the "
            "configured name); declare source.weights or source.revision for a cross-run cache",
            evidence,
            per_run=True,
        )
    sources = [s for s, key in (("/props", "props"), ("/models", "model")) if key in evidence]
    revision = listed.get("revision")
    return ModelIdentity(
        f"server:{sha256_json(evidence)}",
        f"asked the server: {' and '.join(sources)}",
        evidence,
        revision=str(revision) if revision is not None else None,
    )


def cache_settings(settings: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The settings a response-cache key is computed from: with the run id for an entry whose
    identity is unverified (answers are reused within the run only)."""
    return {**settings, "run_id": run_id} if settings.get(PER_RUN) else settings


def is_verified(weights: object) -> bool:
    """Whether a ``weights_sha256`` value names a model (an unverified endpoint's does not)."""
    return isinstance(weights, str) and bool(weights) and not weights.startswith("unverified")
