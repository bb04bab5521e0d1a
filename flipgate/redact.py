"""Secrets out of what flipgate stores, prints or attaches.

:func:`redact` hides the credentials a URL carries (``user:password@`` and key-like query
parameters) wherever it appears in a text (a message, a JSON document); text without any comes
back unchanged, so what is keyed or hashed from it (a backend's settings and fingerprint) stays
the same. :func:`looks_like_key` tells a key from an environment variable's name (for
``source.api_key_env``), and :func:`refuse_key_as_name` refuses one without echoing it.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from flipgate import FlipgateError

#: ``scheme://user[:password]@`` (the userinfo ends at the first "@" before the host)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@\"'<>]+@")
#: query (or fragment) parameters that carry a key
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;#](?:api[_-]?key|key|token|access[_-]?token|auth[_-]?token|secret|"
    r"client[_-]?secret|password|passwd|sig|signature)=)[^&;#\s\"'<>]*",
    re.IGNORECASE,
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


def redact(text: str) -> str:
    """``text`` with every URL's ``user:password@`` and key-like query parameter (``api_key=``,
    ``key=``, ``token=``, ...) replaced by ``***``; unchanged when it carries none."""
    if "://" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    return _SECRET_PARAM.sub(rf"\g<name>{MASK}", text)


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
