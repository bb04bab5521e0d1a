"""Secrets out of what flipgate stores, prints or attaches.

:func:`redact` hides the credentials a URL carries (``user:password@``, with or without a scheme,
and query parameters named like secrets: ``api_key=``, ``subscription-key=``, ``code=``, ``sig=``)
wherever it appears in a text (a message, a JSON document); text without any comes back unchanged,
so what is keyed or hashed from it (a backend's settings and fingerprint) stays the same.
:func:`redact_fields` does the same through a mapping, and hides the value of every field named
like a secret (``extra_body: {api_key: ..}``, ``extra_headers: {Authorization: ..}``).
:func:`looks_like_key` tells a key from an environment variable's name (for
``source.api_key_env``), and :func:`refuse_key_as_name` refuses one without echoing it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

from flipgate import FlipgateError

#: ``scheme://user[:password]@`` (the userinfo ends at the first "@" before the host)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@\"'<>]+@")
#: ``user:password@host`` with no scheme, at the start of a value (text, or after a quote, a
#: space or ``=``)
_BARE_USERINFO = re.compile(r"(?P<lead>^|[\s\"'=(,\[])[^\s/?#@\"'<>:]+:[^\s/?#@\"'<>]+@(?=[\w\[])")
#: a query (or fragment) parameter: its name and value
_PARAM = re.compile(r"(?P<name>[?&;#][^=&;#?\s\"'<>]+)=(?P<value>[^&;#\s\"'<>]*)")
#: a parameter's or field's name that marks its value as a secret: it ends in one of these words
#: (case and ``-``/``.`` separators aside: ``api_key``, ``Ocp-Apim-Subscription-Key``, ``code``,
#: ``X-Amz-Signature``, ``Authorization``), not in ``_env`` (``api_key_env`` names a variable)
_SECRET_NAME = re.compile(
    r"(?:key|token|secret|password|passwd|pwd|signature|sig|code|auth|authorization|"
    r"credentials?|cookie)$"
)
#: the placeholder a hidden credential is replaced with
MASK = "***"

#: an environment variable's name
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: prefixes that mark a value as a key whatever follows (OpenAI, Anthropic, Stripe-style keys)
_KEY_PREFIXES = ("sk-", "sk_")
#: vendor token prefixes that mark a value as a key when a long random part follows
_TOKEN_PREFIXES = (
    "rk_",
    "pk_",
    "hf_",
    "gsk_",
    "r8_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "AKIA",
    "AIza",
)


def is_secret_name(name: str) -> bool:
    """Whether a query parameter or a config field called ``name`` holds a secret: its last word
    ends in ``key``, ``token``, ``secret``, ``password``, ``sig``, ``code``, ``auth``, ..."""
    last = re.split(r"[-_.\s]+", name.strip().lower())[-1]
    return last != "env" and _SECRET_NAME.search(last) is not None


def _mask_param(match: re.Match) -> str:
    if not is_secret_name(match["name"][1:]):
        return match[0]
    return f"{match['name']}={MASK}"


def redact(text: str) -> str:
    """``text`` with every URL's ``user:password@`` (with or without a scheme) and every query
    parameter named like a secret (:func:`is_secret_name`: ``api_key=``, ``subscription-key=``,
    ``code=``, ...) replaced by ``***``; unchanged when it carries none."""
    if "://" not in text and "=" not in text and "@" not in text:
        return text
    text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _BARE_USERINFO.sub(rf"\g<lead>{MASK}@", text)
    return _PARAM.sub(_mask_param, text)


def redact_fields(value: Any) -> Any:
    """``value`` (a config mapping, a fingerprint) with the value of every field named like a
    secret (:func:`is_secret_name`; ``extra_body: {api_key: ..}``, headers' ``Authorization``)
    replaced by ``***`` and every string :func:`redact`-ed, at any depth."""
    if isinstance(value, dict):
        return {
            k: MASK
            if isinstance(k, str) and is_secret_name(k) and isinstance(v, (str, int, float))
            else redact_fields(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_fields(v) for v in value]
    return redact(value) if isinstance(value, str) else value


def redacted_json(value: Any, **dumps: Any) -> str:
    """``value`` as JSON (``json.dumps`` with ``dumps``) with every secret hidden
    (:func:`redact_fields`, then :func:`redact` over the text): what the trials store keeps of a
    model's fingerprint and config, and what a stored fingerprint is compared with."""
    return redact(json.dumps(redact_fields(value), **dumps))


def _entropy(text: str) -> float:
    """Shannon entropy of ``text``'s characters, in bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_like_key(value: str) -> bool:
    """Whether ``value`` (meant to name an environment variable) looks like a key instead: not a
    variable name, a key prefix (``sk-``, ``sk_``, a vendor token prefix before a long random
    part), or a long random run between underscores (letters mixed with digits, or high entropy)."""
    if not VARIABLE_NAME.fullmatch(value) or value.startswith(_KEY_PREFIXES):
        return True
    if any(value.startswith(p) and len(value) - len(p) >= 16 for p in _TOKEN_PREFIXES):
        return True
    for run in value.split("_"):
        mixed = any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
        if (len(run) >= 16 and mixed) or (len(run) >= 24 and _entropy(run) >= 4.0):
            return True
    return False


def refuse_key_as_name(value: str, where: str) -> None:
    """Raise a FlipgateError naming ``where`` (file and field), never ``value``, when ``value`` (an
    ``api_key_env``) looks like a key rather than an environment variable's name."""
    if looks_like_key(value):
        raise FlipgateError(
            f"{where}: the value looks like a key, not a variable name (put the key in an "
            "environment variable and name the variable)"
        )
