"""What flipgate needs of litellm's bundled facts, read without importing litellm (its import takes
seconds): a model's price per token, and the decoding parameters an OpenAI-compatible server takes.

Prices (:func:`map_price`) come from the price map litellm ships inside its package
(``model_prices_and_context_window_backup.json``, the map litellm itself reads when
``LITELLM_LOCAL_MODEL_COST_MAP`` is set, as flipgate sets it), found with
:func:`importlib.util.find_spec` (which locates a top-level package without importing it) and read
once. The lookup reproduces litellm 1.106.2's ``cost_per_token(model=..., prompt_tokens=1,
completion_tokens=1)`` for the names whose answer follows from the map alone: a name under the
``openai/``, ``hosted_vllm/`` or ``anthropic/`` prefix, and a bare name that is an OpenAI or
Anthropic key of the map. Every other name (another provider's prefix, a bare name the map does not
hold, a price that depends on the hour or a pricing tier) is answered by litellm itself, imported
for that case only. tests/unit/backends/test_price_map.py holds the two answers equal, name by name,
over the whole map.

litellm's lookup, as reproduced here (litellm/cost_calculator.py ``cost_per_token``, utils.py
``get_model_info_helper``, litellm_core_utils/get_llm_provider_logic.py):

1. the provider: the prefix before the first ``/`` (``anthropic/claude-2`` and
   ``anthropic/claude-instant-1`` are litellm's ``anthropic_text``: asked of litellm); a bare name
   that is a key of the map: its entry's ``litellm_provider`` when that is ``openai`` or
   ``anthropic`` (an OpenAI fine-tune key ``ft:<base>`` only for gpt-3.5-turbo and gpt-4*, as
   litellm's provider lists have it); any other name is asked of litellm;
2. the entry: litellm first picks the whole name if the map holds it, else the name after the
   prefix, else the whole name (``<name>``); then the first of ``<provider>/<name>`` (``<name>``
   when it has the prefix already), ``<name>``, ``<name>`` without the prefix,
   ``<provider>/<stripped>``, ``<stripped>`` and ``<provider>/<name>`` (also when prefixed) that
   the map holds, compared without regard to case, and whose ``litellm_provider`` is the
   provider's (or absent), where ``<stripped>`` is an OpenAI fine-tune name
   ``ft:<base>:<org>:<suffix>:<id>`` cut to ``ft:<base>``, else ``<name>`` without a trailing
   ``-YYYY-MM-DD``; a name the map holds only under another provider is unknown;
3. none: when no spelling is a key of the map at all, the map's ``fallback_generalizations``
   capability rules (regular expressions over those spellings) may still describe the model, with no
   price: litellm then prices it at 0 (e.g. ``hosted_vllm/<org>/gemini-3-flash-...``,
   ``anthropic/claude-newname-5``); else the name is unknown (litellm raises; None here);
4. the price of one input and one output token: ``input_cost_per_token``, ``output_cost_per_token``
   (0 when absent; an image model's ``output_cost_per_image_token`` stands in for a missing output
   rate); a ``hosted_vllm`` entry without a token price, or one billed per second, costs 0.

Supported parameters (:data:`OPENAI_COMPATIBLE_PARAMS`, :func:`compatible_params`): what litellm
1.106.2's ``get_supported_openai_params`` answers for a served model's name under each prefix.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the bundled price map, no download, for any litellm import after this one (the fallback's, the
# litellm backend's): the same map this module reads
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PRICE_MAP_FILE = "model_prices_and_context_window_backup.json"

#: the prefixes whose price this module answers itself; any other goes to litellm
NATIVE_PREFIXES = frozenset({"openai", "hosted_vllm", "anthropic"})
#: bare names litellm's get_model_info rewrites first (litellm.azure_llms, azure_embedding_models):
#: asked of litellm (the test holds this equal to litellm's own)
AZURE_ALIASES = frozenset(
    {
        "gpt-35-turbo",
        "gpt-35-turbo-16k",
        "gpt-35-turbo-instruct",
        "azure/gpt-41",
        "azure/gpt-41-mini",
        "azure/gpt-41-nano",
        "ada",
    }
)
#: litellm's Anthropic text-completion models (``AnthropicTextConfig._is_anthropic_text_model``)
ANTHROPIC_TEXT_MODELS = frozenset({"claude-2", "claude-instant-1"})
#: modes litellm bills by the second when an entry has no token price (cost_calculator.py)
_WALL_CLOCK_MODES = frozenset(
    {"audio_transcription", "chat", "completion", "embedding", "responses"}
)
_DATED_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_FINETUNE_TAIL = re.compile(r"(:[^:]*){3}$")
_THRESHOLD = re.compile(r"_above_(\d+(?:\.\d+)?)(k|m)?_tokens")


class _AskLitellm(Exception):
    """This name's price is not one this module reproduces: litellm answers it."""


class _NotMapped(Exception):
    """litellm raises for this name (not in its map): no known price."""


@dataclass(frozen=True)
class _Catalog:
    entries: dict[str, dict[str, Any]]
    #: lower-cased key -> key (the last of keys equal but for case, as litellm builds it)
    lower: dict[str, str]
    #: the fallback_generalizations rules that describe a model (those with more than a provider)
    capability: tuple[re.Pattern, ...]
    #: whether any rule carries a price (none does in 1.106.2; one would be asked of litellm)
    rules_priced: bool


def litellm_package_dir() -> Path | None:
    """The installed litellm package's folder, found without importing it; None when absent."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def _catalog() -> _Catalog | None:
    folder = litellm_package_dir()
    if folder is None or not (folder / PRICE_MAP_FILE).is_file():
        return None
    raw = json.loads((folder / PRICE_MAP_FILE).read_text(encoding="utf-8"))
    rules = raw.pop("fallback_generalizations", None)
    entries = {k: v for k, v in raw.items() if isinstance(v, dict)}
    if any("aliases" in v for v in entries.values()):  # litellm expands these: not reproduced
        return None
    capability: list[re.Pattern] = []
    rules_priced = False
    for rule in rules.get("rules", []) if isinstance(rules, dict) else []:
        info = rule.get("model_info") if isinstance(rule, dict) else None
        if not isinstance(info, dict) or not isinstance(rule.get("pattern"), str):
            continue
        if "extends" in rule:  # litellm's legacy rule schema: not reproduced
            rules_priced = True
        rules_priced |= any("cost" in k or "pricing" in k for k in info)
        if set(info) - {"litellm_provider"}:
            try:
                capability.append(re.compile(rule["pattern"], re.IGNORECASE))
            except re.error:  # litellm skips such a rule too
                continue
    return _Catalog(
        entries=entries,
        lower={k.lower(): k for k in entries},
        capability=tuple(capability),
        rules_priced=rules_priced,
    )


def _key(cat: _Catalog, name: str) -> str | None:
    """litellm's get_model_cost_key: the map's key for ``name``, exact or but for case."""
    if name in cat.entries:
        return name
    return cat.lower.get(name.lower())


def _provider(cat: _Catalog, model: str) -> str:
    """The provider litellm's get_llm_provider names for ``model``, where this module knows it."""
    if "/" in model:
        prefix, rest = model.split("/", 1)
        if prefix not in NATIVE_PREFIXES or (
            prefix == "anthropic" and rest in ANTHROPIC_TEXT_MODELS
        ):
            raise _AskLitellm
        return prefix
    entry = cat.entries.get(model)
    provider = entry.get("litellm_provider") if entry else None
    if provider == "openai":
        finetune = model.startswith("ft:") and model.count(":") <= 1
        if not finetune or "ft:gpt-3.5-turbo" in model or "ft:gpt-4" in model:
            return "openai"
    elif (
        provider == "anthropic"
        and model not in ANTHROPIC_TEXT_MODELS
        and "ft:gpt-" not in model
        and not model.startswith("gpt-image")
    ):
        return "anthropic"
    raise _AskLitellm


def _strip(model: str) -> str:
    """litellm's _strip_model_name for these providers."""
    if "ft:" in model:
        return _FINETUNE_TAIL.sub("", model)
    return _DATED_SUFFIX.sub("", model)


def _model_info(cat: _Catalog, model: str, provider: str) -> dict[str, Any]:
    """The map entry litellm's get_model_info_helper reads for ``model`` under ``provider``."""
    if model in AZURE_ALIASES:
        raise _AskLitellm
    if model.startswith(provider + "/"):
        split = model.split("/", 1)[1]
        combined = model
        stripped = _strip(split)
        prefixed = f"{provider}/{model}"
    else:
        split = model
        combined = f"{provider}/{model}"
        stripped = _strip(model)
        prefixed = combined
    candidates = (combined, model, combined, split, f"{provider}/{stripped}", stripped, prefixed)
    keys = [_key(cat, c) for c in candidates]
    for key in keys:
        if key is not None:
            entry = cat.entries[key]
            if entry.get("litellm_provider") in (None, provider):
                return entry
    if any(k is not None for k in keys):
        raise _NotMapped  # known, but another provider's
    if any(rule.search(c) for c in candidates if c for rule in cat.capability):
        if cat.rules_priced:
            raise _AskLitellm
        return {"litellm_provider": provider}  # described by a rule, with no price
    raise _NotMapped


def _rate(value: Any) -> float:
    """litellm's get_cost_per_unit: a number, or a string of one; else 0."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return 0.0
    return 0.0


def _native_price(model: str) -> tuple[float, float] | None:
    cat = _catalog()
    if (
        cat is None
        or not isinstance(model, str)
        or not model
        or os.environ.get("USE_LITELLM_PROXY")
    ):
        raise _AskLitellm
    provider = _provider(cat, model)
    # cost_per_token's own pick of the name it looks up
    rest = model.split("/", 1)[1] if "/" in model else model
    name = model if model in cat.entries else rest if rest in cat.entries else model
    try:
        info = _model_info(cat, name, provider)
    except _NotMapped:
        return None
    if info.get("tiered_pricing") is not None or info.get("off_peak_pricing") is not None:
        raise _AskLitellm  # priced by tier or by the hour
    for field, value in info.items():
        m = _THRESHOLD.search(field)
        if m and value is not None:
            scale = {"k": 1e3, "m": 1e6}.get(m.group(2) or "", 1.0)
            if float(m.group(1)) * scale <= 1:  # a tier one token already reaches
                raise _AskLitellm
    token_priced = (
        _rate(info.get("input_cost_per_token")) > 0
        or _rate(info.get("output_cost_per_token")) > 0
        or info.get("tiered_pricing") is not None
    )
    if not token_priced:
        per_second = any(
            info.get(k) is not None
            for k in ("cost_per_second", "input_cost_per_second", "output_cost_per_second")
        )
        if provider == "hosted_vllm" or (
            per_second and info.get("mode") in _WALL_CLOCK_MODES | {None}
        ):
            return 0.0, 0.0
    cost_in = _rate(info.get("input_cost_per_token"))
    cost_out = _rate(info.get("output_cost_per_token"))
    if cost_out == 0.0 and info.get("output_cost_per_image_token") is not None:
        cost_out = _rate(info["output_cost_per_image_token"])
    return cost_in, cost_out


def native_price(model: str) -> tuple[float, float] | None | bool:
    """:func:`map_price` without litellm: False where litellm must answer (for the tests)."""
    try:
        return _native_price(model)
    except _AskLitellm:
        return False


def litellm_price(model: str) -> tuple[float, float] | None:
    """litellm's own answer (imports it): ``cost_per_token`` for one input and one output
    token; None where it raises (a model not in its map)."""
    import litellm  # LITELLM_LOCAL_MODEL_COST_MAP is set above

    try:
        cost_in, cost_out = litellm.cost_per_token(
            model=model, prompt_tokens=1, completion_tokens=1
        )
    except Exception:  # litellm raises for models missing from its map
        return None
    return float(cost_in), float(cost_out)


def map_price(model: str) -> tuple[float, float] | None:
    """(USD per input token, per output token) for a litellm model name, as litellm 1.106.2's
    ``cost_per_token`` answers for one token of each: None for a model its price map does not
    know. litellm is imported only for the names this module does not answer itself (see the
    module's docstring): never for ``openai/...`` or ``hosted_vllm/...``."""
    try:
        return _native_price(model)
    except _AskLitellm:
        return litellm_price(model)


# -- supported decoding parameters --------------------------------------------------------------

_OPENAI_PARAMS = frozenset(
    {
        "audio",
        "extra_headers",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_retries",
        "max_tokens",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "web_search_options",
    }
)

#: what litellm 1.106.2's ``get_supported_openai_params(model="<prefix>/<name>")`` answers for a
#: served model's name (``openai/smollm2``, ``hosted_vllm/Qwen/Qwen2.5-7B-Instruct``), by prefix:
#: the OpenAI chat parameters (32), and for vLLM ``thinking`` besides. Under ``openai/`` litellm
#: answers differently for OpenAI's own reasoning models: an o-series name of its catalog (o1, o3,
#: o3-mini, o4-mini: 26 or 27) and any name containing gpt-5 or gpt-6 but gpt-5-chat (13 to 25; no
#: logprobs, top_p, stop, penalties): which is why hosted OpenAI models stay on litellm, and only
#: self-hosted servers take the direct path. Under ``hosted_vllm/`` every name gets the same list.
OPENAI_COMPATIBLE_PARAMS: dict[str, frozenset[str]] = {
    "openai": _OPENAI_PARAMS,
    "hosted_vllm": _OPENAI_PARAMS | {"thinking"},
}


def compatible_params(model: str) -> frozenset[str] | None:
    """The decoding parameters a self-hosted server behind ``model`` ("<prefix>/<name>") takes, as
    litellm filters them (:data:`OPENAI_COMPATIBLE_PARAMS`); None when the prefix is not one of
    those."""
    prefix = model.split("/", 1)[0] if "/" in model else None
    return OPENAI_COMPATIBLE_PARAMS.get(prefix) if prefix else None
