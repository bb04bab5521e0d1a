"""Secrets out of what flipgate stores, prints or attaches: by name and by shape.

:func:`redact` hides the credentials a URL carries wherever it appears in a text (a message, a JSON
document): ``user:password@`` (with or without a scheme), query parameters named like secrets
(``api_key=``, ``subscription-key=``, ``code=``, ``sig=``), and any path segment or query value
shaped like a key whatever its name (:func:`is_key_shaped`: ``/sk-proj-…/v1``, a JWT, a vendor
token). Text without any comes back unchanged, so what is keyed or hashed from it (a backend's
settings and fingerprint) stays the same. :func:`redact_fields` does the same through a mapping,
and hides the value of every field named like a secret (:func:`is_secret_name`: ``api_key``,
``Authorization``, ``bearer``, ``jwt``, ``pass``, ...) and every value shaped like a key or a
credential (``Bearer …``). Every writer goes through these two: the trials store, the cards (read
from the store), Allure's attachments and environment, and the backends' messages.
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
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^\s/?#@\"'<>]+@")
#: ``user:password@host`` with no scheme, at the start of a value (text, or after a quote, a
#: space or ``=``). The user and the password are at most 256 characters each, and a scheme at
#: most 32, so that a long text (a reply, a config) is scanned in linear time, not quadratic
_BARE_USERINFO = re.compile(
    r"(?P<lead>^|[\s\"'=(,\[])[^\s/?#@\"'<>:]{1,256}:[^\s/?#@\"'<>]{1,256}@(?=[\w\[])"
)
#: a query (or fragment) parameter: its name and value
_PARAM = re.compile(r"(?P<name>[?&;#][^=&;#?\s\"'<>]+)=(?P<value>[^&;#\s\"'<>]*)")
#: a parameter's or field's name that marks its value as a secret: it ends in one of these words
#: (case and ``-``/``.`` separators aside: ``api_key``, ``Ocp-Apim-Subscription-Key``, ``code``,
#: ``X-Amz-Signature``, ``Authorization``), not in ``_env`` (``api_key_env`` names a variable)
_SECRET_NAME = re.compile(
    r"(?:key|token|secret|password|passwd|pwd|signature|sig|code|auth|authorization|"
    r"credentials?|cookie)$"
)
#: names that mark a secret only as a whole word (as a suffix they end ordinary words: "bypass")
_SECRET_WORDS = frozenset(
    {"pass", "passphrase", "passcode", "bearer", "jwt", "sas", "otp", "pat", "csrf", "xsrf"}
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
    ends in ``key``, ``token``, ``secret``, ``password``, ``sig``, ``code``, ``auth``, ... or is
    one of :data:`_SECRET_WORDS` (``pass``, ``bearer``, ``jwt``, ...)."""
    last = re.split(r"[-_.\s]+", name.strip().lower())[-1]
    return last != "env" and (last in _SECRET_WORDS or _SECRET_NAME.search(last) is not None)


#: a JSON Web Token: base64url header ``{"…`` (``eyJ``), payload and signature
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*")
#: a run of 24 or more letters and digits: a random key when upper case, lower case and digits are
#: all in it (base62/base64 keys; a hex digest or a model's name has one case or short runs)
_RUN = re.compile(r"[A-Za-z0-9]{24,}")
#: a URL's path (after the host) and query, up to whitespace or a quote
_URL_REST = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s/?#\"'<>]*)(?P<rest>[/?#][^\s\"'<>]*)"
)
#: a path segment or a query value: the parts of a URL's rest that may hold a key
_URL_PART = re.compile(r"[^/?#&;=]+")
#: a credential with its scheme, as an Authorization header holds it
_SCHEMED = re.compile(r"(?i)^(?:bearer|basic|token|digest)\s+\S{8,}$")


def _is_vendor_token(value: str) -> bool:
    """A vendor token prefix (``hf_``, ``ghp_``, ``AKIA``, ...) before 16 or more characters."""
    return any(value.startswith(p) and len(value) - len(p) >= 16 for p in _TOKEN_PREFIXES)


def is_key_shaped(token: str) -> bool:
    """Whether ``token`` (a URL's path segment, a query value, a field's whole value) is shaped
    like a key whatever it is called: a key or vendor-token prefix before a long random part
    (``sk-proj-…``, ``hf_…``, ``ghp_…``), a JWT, or a long random run of mixed-case letters and
    digits. A hex digest, a version or a model's name is not."""
    if (token.startswith(_KEY_PREFIXES) and len(token) >= 20) or _is_vendor_token(token):
        return True
    if _JWT.search(token):
        return True
    return any(
        any(c.islower() for c in run)
        and any(c.isupper() for c in run)
        and any(map(str.isdigit, run))
        for run in _RUN.findall(token)
    )


def _mask_param(match: re.Match) -> str:
    if not is_secret_name(match["name"][1:]):
        return match[0]
    return f"{match['name']}={MASK}"


def _mask_shaped(match: re.Match) -> str:
    """A URL with every key-shaped path segment and query value replaced by ``***``."""
    rest = _URL_PART.sub(lambda m: MASK if is_key_shaped(m[0]) else m[0], match["rest"])
    return match["head"] + rest


def redact(text: str) -> str:
    """``text`` with every URL's ``user:password@`` (with or without a scheme), every query
    parameter named like a secret (:func:`is_secret_name`: ``api_key=``, ``subscription-key=``,
    ``code=``, ...) and every path segment or query value shaped like a key
    (:func:`is_key_shaped`) replaced by ``***``; unchanged when it carries none."""
    if "://" not in text and "=" not in text and "@" not in text:
        return text
    text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _BARE_USERINFO.sub(rf"\g<lead>{MASK}@", text)
    text = _PARAM.sub(_mask_param, text)
    return _URL_REST.sub(_mask_shaped, text) if "://" in text else text


def _is_secret_value(value: str) -> bool:
    """A field's whole value that is a credential by its shape (``Bearer …``, a key)."""
    return bool(_SCHEMED.match(value.strip())) or (" " not in value and is_key_shaped(value))


def redact_fields(value: Any) -> Any:
    """``value`` (a config mapping, a fingerprint) with the value of every field named like a
    secret (:func:`is_secret_name`; ``extra_body: {api_key: ..}``, headers' ``Authorization``)
    and every string that is a credential by its shape (``Bearer …``, :func:`is_key_shaped`)
    replaced by ``***``, and every other string :func:`redact`-ed, at any depth."""
    if isinstance(value, dict):
        return {
            k: MASK
            if isinstance(k, str) and is_secret_name(k) and isinstance(v, (str, int, float))
            else redact_fields(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_fields(v) for v in value]
    if isinstance(value, str):
        return MASK if _is_secret_value(value) else redact(value)
    return value


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
    if _is_vendor_token(value):
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
