"""Secrets are never echoed or stored (issue #28): a key written where models.yaml wants the
name of an environment variable is refused without being shown, and the credentials of an
``api_base`` URL are redacted in everything a run stores, prints or attaches, while the calls
still carry them to the server."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import types

import pytest
from support.bad_input import Case, models_with, run_in_process
from support.paths import write
from support.scripted import ScriptedBackend
from support.suite_runs import PASSING, models_yaml, run_suite

from flipgate import FlipgateError
from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request
from flipgate.exitcodes import USAGE_ERROR
from flipgate.redact import looks_like_key, redact, redact_fields
from flipgate.store import TrialStore

#: keys of several shapes, each written where a variable's name belongs
KEYS = [
    "sk-proj-Zq3x9fT7Lp22WdK4mN8a",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "Zq3x-9fT7-Lp22-WdK4",
]
PASSWORD = "sk-pw-7Hq2Xv9LmC4tR8"
QUERY_KEY = "sk-qk-3Nf8Yz1KdW6pB0"
PATH_KEY = "sk-proj-Pk7Rt2Lm9Xq4Wz8Nc3Vb"


def shows_part_of(value: str, text: str) -> bool:
    """Whether any 5 consecutive characters of ``value`` appear in ``text``."""
    return any(value[i : i + 5] in text for i in range(len(value) - 4))


def litellm_entry(source: str) -> str:
    return f"{{id: m1, backend: litellm, source: {source}, readouts: [regex]}}"


@pytest.mark.parametrize("value", KEYS, ids=["sk-", "sk_live_", "hex40", "dashed"])
def test_a_key_as_api_key_env_is_refused_without_showing_it(value, tmp_path, capsys):
    case = Case(
        "key-as-variable",
        models=models_with(model=litellm_entry(f"{{model: openai/x, api_key_env: '{value}'}}")),
    )
    status, text = run_in_process(tmp_path, case, capsys)
    assert status == USAGE_ERROR, text[-3000:]
    assert "models.yaml: field models[0].source.api_key_env: the value looks like a key" in text
    assert "Traceback" not in text and not shows_part_of(value, text), text[-3000:]
    # a backend built from a config that skipped models.yaml (a variant) refuses it as well
    with pytest.raises(FlipgateError, match="source.api_key_env: the value looks like a key") as e:
        LiteLLMBackend(
            {"id": "x", "backend": "litellm", "source": {"model": "openai/x", "api_key_env": value}}
        )
    assert not shows_part_of(value, str(e.value))


def test_variable_names_are_not_taken_for_keys():
    names = ["OPENAI_API_KEY", "FLIPGATE_TEST_KEY", "AZURE_OPENAI_API_KEY_2", "hf_token", "X1"]
    assert not any(map(looks_like_key, names))
    assert looks_like_key("hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh")
    assert looks_like_key("AKIAIOSFODNN7EXAMPLE")


def test_redact_hides_url_credentials_and_keeps_other_text():
    assert redact("http://user:sk-abc@host:8/v1") == "http://***@host:8/v1"
    assert redact("https://h/v1?api_key=sk-1&x=2") == "https://h/v1?api_key=***&x=2"
    assert redact("https://h/v1?x=1&key=a&token=b") == "https://h/v1?x=1&key=***&token=***"
    assert redact("failed: GET https://u:p@h/v1 refused") == "failed: GET https://***@h/v1 refused"
    for plain in ("http://127.0.0.1:8000/v1", "https://api.openai.com/v1?model=x", "a=b"):
        assert redact(plain) == plain  # unchanged: cache keys of plain URLs stay valid


def test_backend_keys_and_shows_the_redacted_url_and_calls_the_real_one():
    url = f"http://flipgate:{PASSWORD}@127.0.0.1:9/v1?api_key={QUERY_KEY}"
    backend = LiteLLMBackend(
        {"id": "x", "backend": "litellm", "source": {"model": "openai/x", "api_base": url}}
    )
    redacted = "http://***@127.0.0.1:9/v1?api_key=***"
    assert backend.settings["api_base"] == backend.fingerprint["api_base"] == redacted
    kw = backend.kwargs(Request((("user", "Q?"),), "Answer:", ("A", "B")))
    assert kw["api_base"] == f"http://127.0.0.1:9/v1?api_key={QUERY_KEY}"
    basic = base64.b64encode(f"flipgate:{PASSWORD}".encode()).decode()
    assert kw["extra_headers"] == {"Authorization": f"Basic {basic}"}
    plain = LiteLLMBackend(
        {
            "id": "y",
            "backend": "litellm",
            "source": {"model": "openai/x", "api_base": "http://h/v1"},
        }
    )
    assert plain.settings["api_base"] == "http://h/v1"


def test_the_store_redacts_urls_in_model_configs(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    url = f"http://u:{PASSWORD}@h/v1?key={QUERY_KEY}"
    store.add_model("m", {"api_base": url}, {"source": {"api_base": url}})
    stored = json.dumps(store.models())
    assert (
        PASSWORD not in stored and QUERY_KEY not in stored and "http://***@h/v1?key=***" in stored
    )


@pytest.mark.slow
def test_api_base_credentials_reach_the_server_and_nothing_else(serve, tmp_path):
    seen: dict[str, list] = {}
    servers = {}
    for name in ("userinfo", "query", "path"):
        server = serve(ScriptedBackend(rule=lambda r: "B"))
        handler = server.httpd.RequestHandlerClass
        post = handler.do_POST

        def noting_post(self, post=post, name=name):
            seen.setdefault(name, []).append((self.path, self.headers.get("Authorization")))
            return post(self)

        handler.do_POST = noting_post
        servers[name] = server
    userinfo = servers["userinfo"].base_url.replace("http://", f"http://flipgate:{PASSWORD}@")
    query = f"{servers['query'].base_url}?api_key={QUERY_KEY}"
    in_path = servers["path"].base_url.rstrip("/").rsplit("/", 1)
    in_path = f"{in_path[0]}/{PATH_KEY}/{in_path[1]}"  # a key as a path segment: .../sk-proj-…/v1
    price = "price: {input_per_mtok: 1.0, output_per_mtok: 4.0}"
    models = models_yaml(
        tmp_path / "models.yaml",
        f"""
  - {{id: via-userinfo, backend: litellm, readouts: [regex], {price},
     source: {{model: openai/a, api_base: "{userinfo}", api_key_env: FLIPGATE_SECRETS_KEY}}}}
  - {{id: via-query, backend: litellm, readouts: [regex], {price},
     source: {{model: openai/b, api_base: "{query}", api_key_env: FLIPGATE_SECRETS_KEY}}}}
  - {{id: via-path, backend: litellm, readouts: [regex], {price},
     source: {{model: openai/c, api_base: "{in_path}", api_key_env: FLIPGATE_SECRETS_KEY}}}}
""",
        datasets="[arc_challenge]",
    )
    thresholds = write(tmp_path / "thresholds" / "default.yaml", PASSING).parent
    os.environ["FLIPGATE_SECRETS_KEY"] = "a-key-the-servers-do-not-check"
    try:
        proc = run_suite(tmp_path, models, thresholds, "--budget", "1.0", "--pilot-items", "1")
    finally:
        del os.environ["FLIPGATE_SECRETS_KEY"]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    # the calls carried the credentials: Basic auth from user:password@, the query as given
    basic = "Basic " + base64.b64encode(f"flipgate:{PASSWORD}".encode()).decode()
    assert seen["userinfo"] and all(auth == basic for _, auth in seen["userinfo"])
    assert seen["query"] and all(f"api_key={QUERY_KEY}" in path for path, _ in seen["query"])
    assert seen["path"] and all(f"/{PATH_KEY}/" in path for path, _ in seen["path"])
    assert all(s.counts["ok"] > 0 for s in servers.values())
    # ... and nothing the run left behind or printed holds them
    (db,) = (tmp_path / "runs").glob("*/trials.sqlite")
    with sqlite3.connect(db) as conn:
        stored = {m: json.loads(c) for m, c in conn.execute("SELECT model_id, config FROM models")}
    assert stored["via-userinfo"]["source"]["api_base"].startswith("http://***@127.0.0.1:")
    assert stored["via-query"]["source"]["api_base"].endswith("/v1?api_key=***")
    assert stored["via-path"]["source"]["api_base"].endswith("/***/v1")
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != models]
    assert any("cards" in str(p) for p in files) and any("allure" in str(p) for p in files)
    leaked = [
        str(p)
        for p in files
        if any(s.encode() in p.read_bytes() for s in (PASSWORD, QUERY_KEY, PATH_KEY))
    ]
    assert not leaked and not any(s in out for s in (PASSWORD, QUERY_KEY, PATH_KEY))


#: issue #42: secrets in forms the first redaction missed, each with the value it must hide
SECRET_FORMS = {
    "subscription-key": (f"https://x.azure-api.net/v1?subscription-key={QUERY_KEY}&v=2", QUERY_KEY),
    "azure-function-code": (f"https://f.azurewebsites.net/api/chat?code={QUERY_KEY}==", QUERY_KEY),
    "signed-url": (f"https://h/v1?X-Amz-Date=1&X-Amz-Signature={QUERY_KEY}", QUERY_KEY),
    "userinfo-without-scheme": (f"flipgate:{PASSWORD}@127.0.0.1:8080/v1", PASSWORD),
}


@pytest.mark.parametrize("form", SECRET_FORMS)
def test_redact_hides_every_form_of_url_secret(form):
    url, secret = SECRET_FORMS[form]
    redacted = redact(url)
    assert secret not in redacted and "***" in redacted
    assert redact(f'{{"api_base": "{url}"}}') == f'{{"api_base": "{redacted}"}}'  # in JSON too
    for plain in ("https://h/v1?api-version=2024-06-01&model=x", "mail me@host.com", "a: b@c"):
        assert redact(plain) == plain


def test_the_store_redacts_secret_fields_and_every_url_form(tmp_path):
    """What add_model stores (and `flipgate baseline` copies on) holds none of the secrets: URL
    forms, ``extra_body``'s and headers' fields named like secrets; other fields are kept."""
    store = TrialStore(tmp_path / "trials.sqlite")
    body_key, header_key = "sk-body-9Qw2Er4Ty6Ui8Op0", "hdr-Zx1Cv3Bn5Mm7Kk9L"
    config = {
        "source": {"model": "openai/x", "api_key_env": "OPENAI_API_KEY"},
        "extra_body": {"api_key": body_key, "temperature": 0.5},
        "extra_headers": {"Ocp-Apim-Subscription-Key": header_key, "X-Trace": "t1"},
        "max_new_tokens": 3,
        "urls": [url for url, _ in SECRET_FORMS.values()],
    }
    store.add_model("m", {"api_base": SECRET_FORMS["userinfo-without-scheme"][0]}, config)
    with sqlite3.connect(tmp_path / "trials.sqlite") as conn:
        stored = " ".join(conn.execute("SELECT fingerprint || config FROM models").fetchone())
    for secret in (PASSWORD, QUERY_KEY, body_key, header_key):
        assert not shows_part_of(secret, stored), (secret, stored)
    kept = store.models()["m"]["config"]
    assert kept["source"]["api_key_env"] == "OPENAI_API_KEY" and kept["max_new_tokens"] == 3
    assert kept["extra_body"] == {"api_key": "***", "temperature": 0.5}
    assert kept["extra_headers"]["X-Trace"] == "t1"


#: issue #60: keys known by their shape, wherever in a URL (no secret-like name beside them)
SHAPED_URLS = {
    "sk-in-path": (f"http://127.0.0.1:8080/{PATH_KEY}/v1", PATH_KEY),
    "jwt-in-path": (
        "https://gw.example/t/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.c2lnbmF0dXJl/v1",
        "eyJzdWIiOiIxMjM0NTYifQ",
    ),
    "github-token-in-path": (
        "https://h/u/ghp_Ab12Cd34Ef56Gh78Ij90Kl12/v1",
        "ghp_Ab12Cd34Ef56Gh78Ij90Kl12",
    ),
    "random-query-value": (
        "https://h/v1?deployment=x&t=Qx7Lm2Rt9Wz4Kp8Nc3Vb6Hd1Fg5",
        "Qx7Lm2Rt9Wz4Kp8Nc3Vb6Hd1Fg5",
    ),
}
#: URLs with no secret: a model's name, a hex digest, an API version stay as they are
PLAIN_URLS = (
    "https://h/v1/models/meta-llama/Llama-3.1-70B-Instruct?api-version=2024-06-01",
    "https://huggingface.co/x/resolve/da39a3ee5e6b4b0d3255bfef95601890afd80709/m-Q8_0.gguf",
    "http://127.0.0.1:8080/openai/deployments/gpt-4o-mini-2024-07-18/v1",
)


@pytest.mark.parametrize("form", SHAPED_URLS)
def test_redact_hides_a_key_by_its_shape_anywhere_in_a_url(form):
    url, secret = SHAPED_URLS[form]
    for text in (url, f"could not reach {url}: refused", json.dumps({"api_base": url})):
        redacted = redact(text)
        assert not shows_part_of(secret, redacted) and "***" in redacted, redacted
    for plain in PLAIN_URLS:
        assert redact(plain) == plain


#: extra_body / header fields: secret by their name (beyond #42's list) or by their value's shape
SECRET_FIELDS = {
    "bearer": "plain-value-1",
    "jwt": "plain-value-2",
    "pass": "plain-value-3",
    "passphrase": "plain-value-4",
    "X-Api-Token": "plain-value-5",
    "sessionCookie": "plain-value-6",
    "Proxy-Authorization": "Basic Zmxp:cGF0ZQ",
    "routing": "Bearer qwertyuiop123",  # a credential by its scheme, whatever the field
    "tenant": "hf_AbCdEfGhIjKlMnOpQrStUv",  # a vendor token
    "x": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",  # a JWT
}
#: fields that are not secrets, and ordinary words ending like one ("bypass", "compass")
PLAIN_FIELDS = {
    "bypass": "cache",
    "compass": "north",
    "temperature": 0.5,
    "model": "Qwen2.5-VL-72B-Instruct",
    "revision": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "system": "Answer with one letter.",
}


def test_the_store_masks_secret_fields_by_name_and_by_shape(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    config = {"extra_body": {**SECRET_FIELDS, **PLAIN_FIELDS}, "extra_headers": SECRET_FIELDS}
    store.add_model("m", {"api_base": SHAPED_URLS["sk-in-path"][0]}, config)
    with sqlite3.connect(tmp_path / "trials.sqlite") as conn:
        stored = " ".join(conn.execute("SELECT fingerprint || config FROM models").fetchone())
    for secret in [*SECRET_FIELDS.values(), PATH_KEY]:
        assert not shows_part_of(secret.split()[-1], stored), (secret, stored)  # past "Bearer "
    kept = store.models()["m"]
    assert kept["config"]["extra_body"] == {**dict.fromkeys(SECRET_FIELDS, "***"), **PLAIN_FIELDS}
    assert kept["fingerprint"]["api_base"] == "http://127.0.0.1:8080/***/v1"


def test_allure_attachments_and_environment_are_redacted(tmp_path):
    from flipgate.report import attach_json, write_environment

    attached = []
    fake_allure = types.SimpleNamespace(
        attach=lambda body, **_: attached.append(body),
        attachment_type=types.SimpleNamespace(JSON="json"),
    )
    url, secret = SHAPED_URLS["sk-in-path"]
    attach_json(fake_allure, {"error": f"could not reach {url}"}, "record")
    write_environment(tmp_path, {"server": f"{url}?api_key={QUERY_KEY}"})
    written = attached[0] + (tmp_path / "environment.properties").read_text()
    assert secret not in written and QUERY_KEY not in written and "***" in written


@pytest.mark.parametrize(
    "text",
    [
        "=a" * 40_000 + ":b",  # many starts of a bare user:password, none ending in "@"
        "a-" * 100_000 + "x://h/",  # many starts of a scheme
        "eyJaaaaaa." * 20_000 + "://",
        "x" * 200_000,  # one long run of one letter
    ],
)
def test_redaction_does_not_hang_on_long_text(text):
    """A long reply or config value is redacted, not hung on: each pattern's parts are bounded
    and no lookahead scans the rest of the text from every position (a quadratic pattern took
    minutes on these; linear ones take milliseconds, so the limit only catches a hang)."""
    import time

    start = time.perf_counter()
    redact(text)
    redact_fields({"value": text, "nested": [text]})
    assert time.perf_counter() - start < 10.0
