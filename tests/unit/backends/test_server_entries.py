"""docs/servers.md's models.yaml entries, one per inference engine, hold what they promise.

Every ```yaml block of that page is (a) a models.yaml excerpt that flipgate accepts, checked by
test_doc_examples' own helper (schema, loader, merged into the shipped models.yaml), and (b) an
entry from which :class:`LiteLLMBackend` builds the request the page describes, on the path the
entry takes (the direct client's JSON body for an OpenAI-compatible server, litellm's arguments
otherwise): ``logprobs`` and ``top_logprobs`` only where ``capabilities.logprobs`` (and then with
the ``letter_logprob`` readout), ``seed`` only where ``capabilities.seed`` and the temperature is
above 0, ``max_tokens`` from ``max_new_tokens``, the key read from ``api_key_env``, and every
``decoding`` parameter supported for the entry's prefix (none silently dropped). The page's
summary table must agree with the entries: same model prefix, same client, same logprobs claim,
and a top_logprobs maximum of at least the 20 flipgate asks for (or 'uncapped') wherever logprobs
are claimed.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from support.doc_blocks import MARKER, Block, blocks, check_block
from support.paths import REPO

from flipgate import FlipgateError
from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request
from flipgate.backends.identity import served_name

PAGE = REPO / "docs" / "servers.md"
ENGINES = 6  # vLLM, SGLang, TGI, llama.cpp, ollama, OpenAI
TOP_LOGPROBS = 20  # what LiteLLMBackend.request_params asks for
SEED = 1234
LABELS = ("A", "B", "C", "D")

YAML_BLOCKS = [b for b in blocks(PAGE) if b.lang == "yaml"]


def entries(block: Block) -> list[dict]:
    return yaml.safe_load(block.text)


ENTRIES = [(b, m) for b in YAML_BLOCKS for m in entries(b)]


def table() -> dict[str, dict[str, str]]:
    """The summary table's rows by entry id: column name -> cell text (backticks removed)."""
    rows = [ln for ln in PAGE.read_text(encoding="utf-8").splitlines() if ln.startswith("|")]
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    out = {}
    for row in rows[2:]:
        cells = [c.strip().replace("`", "") for c in row.strip("|").split("|")]
        out[cells[head.index("entry id")]] = dict(zip(head, cells))
    return out


def sent(backend: LiteLLMBackend, request: Request) -> dict:
    """What ``backend`` sends for ``request`` on its path: the direct client's JSON body (the
    key in its headers, as ``api_key``), or litellm's arguments."""
    if backend.client == "litellm":
        return backend.kwargs(request)
    body = backend.body(request)
    if "Authorization" in backend.headers():
        body["api_key"] = backend.headers()["Authorization"]
    return body


def check_entry(model: dict, row: dict[str, str] | None, monkeypatch) -> None:
    """Assert that ``model`` builds a backend whose requests carry what the entry and its table
    row promise; AssertionError (or FlipgateError from the backend) otherwise."""
    source, caps = model["source"], model.get("capabilities") or {}
    readouts = model.get("readouts") or []
    if source.get("api_key_env"):
        monkeypatch.setenv(source["api_key_env"], "fake-key-for-the-test")
    assert bool(caps.get("logprobs")) == ("letter_logprob" in readouts), (
        "capabilities.logprobs and the letter_logprob readout go together"
    )
    backend = LiteLLMBackend(model)
    assert (
        backend.client == "direct"
        or source.get("api_key_env")
        or not (source["model"].startswith("openai/"))
    ), "litellm's openai/ prefix needs a key: without api_key_env every call fails"
    assert backend.params == model.get("decoding", {}), "a decoding parameter would be dropped"
    ask = Request(messages=(("user", "Which? A B C D"),), labels=LABELS, seed=SEED)
    kw = sent(backend, ask)
    if backend.client == "litellm":
        assert kw["model"] == source["model"]
        assert kw.get("api_base") == source.get("api_base")
    else:
        assert kw["model"] == served_name(source["model"])
        assert backend._api_base == source["api_base"]
    assert kw["max_tokens"] == model["max_new_tokens"]
    assert ("api_key" in kw) == bool(source.get("api_key_env"))
    if caps.get("logprobs"):
        assert kw["logprobs"] is True and kw["top_logprobs"] == TOP_LOGPROBS
    else:
        assert "logprobs" not in kw and "top_logprobs" not in kw
    assert "logprobs" not in sent(backend, Request(messages=ask.messages, seed=SEED))
    temperature = float(model.get("decoding", {}).get("temperature", 0))
    assert ("seed" in kw) == (bool(caps.get("seed")) and temperature > 0)
    sampled = LiteLLMBackend(
        {**model, "decoding": {**model.get("decoding", {}), "temperature": 0.7}}
    )
    kw = sent(sampled, ask)
    assert kw.get("seed") == (SEED if caps.get("seed") else None)
    if row is None:
        return
    prefix = row["source.model"].split("<")[0]  # "hosted_vllm/<model>": the part before <
    assert source["model"].startswith(prefix), (row["source.model"], source["model"])
    assert row["client"] == backend.client, (row["client"], backend.client)
    assert row["logprobs"].startswith("yes") == bool(caps.get("logprobs"))
    if caps.get("logprobs") and not row["top_logprobs max"].startswith("uncapped"):
        most = max(map(int, re.findall(r"\d+", row["top_logprobs max"])), default=0)
        assert most >= TOP_LOGPROBS, f"the engine allows {most} < {TOP_LOGPROBS} top_logprobs"


def test_every_engine_has_one_marked_block_and_a_table_row():
    assert len(YAML_BLOCKS) == ENGINES, [b.where for b in YAML_BLOCKS]
    unmarked = [b.where for b in YAML_BLOCKS if not MARKER.fullmatch(b.first)]
    assert not unmarked, f"not a '# models.yaml (excerpt)' block: {unmarked}"
    ids = [m["id"] for _, m in ENTRIES]
    assert len(ids) == len(set(ids)) == ENGINES
    assert set(table()) == set(ids)
    assert all(m["backend"] == "litellm" for _, m in ENTRIES)


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[b.where for b in YAML_BLOCKS])
def test_entry_is_a_valid_models_yaml_excerpt(block, tmp_path):
    check_block(block, tmp_path)


@pytest.mark.parametrize("block, model", ENTRIES, ids=[m["id"] for _, m in ENTRIES])
def test_entry_requests_carry_what_it_promises(block, model, monkeypatch):
    check_entry(model, table()[model["id"]], monkeypatch)


def _logprobs_entry() -> dict:
    return copy.deepcopy(next(m for _, m in ENTRIES if m["id"] == "qwen2.5-7b-vllm"))


def vllm_row(client: str = "direct", logprobs: str = "yes", top: str = "20") -> dict[str, str]:
    """A summary-table row for the vLLM entry (the one the broken-entry checks start from)."""
    return {
        "source.model": "hosted_vllm/",
        "client": client,
        "logprobs": logprobs,
        "top_logprobs max": top,
    }


def _break_readout(m):
    m["readouts"] = ["regex"]


def _break_key(m):  # hosted OpenAI (litellm's path) without a key
    m["source"] = {"model": "openai/gpt-4o-mini"}


def _break_decoding(m):
    m["unsupported_params"] = ["temperature"]  # declared in decoding, never sent


def _break_capability(m):
    m["readouts"] = ["regex", "letter_logprob"]
    m["capabilities"]["logprobs"] = False


@pytest.mark.parametrize(
    "breaks, row",
    [
        (_break_readout, None),  # logprobs claimed, letter_logprob missing
        (_break_key, None),  # openai/ with no api_key_env
        (_break_decoding, None),  # params_preview would drop a decoding parameter
        (_break_capability, None),  # letter_logprob without the capability
        (None, vllm_row(top="5")),
        (None, vllm_row(logprobs="no")),
        (None, vllm_row(client="litellm")),
    ],
    ids=[
        "no-letter-logprob",
        "hosted-openai-without-key",
        "dropped-decoding",
        "readout-without-logprobs",
        "table-cap-below-20",
        "table-disagrees",
        "table-names-another-client",
    ],
)
def test_the_check_fails_on_a_broken_entry(breaks, row, monkeypatch):
    model = _logprobs_entry()
    if breaks:
        breaks(model)
    with pytest.raises((AssertionError, FlipgateError)):
        check_entry(model, row, monkeypatch)


def test_the_unbroken_entry_passes_the_same_check(monkeypatch):
    model = _logprobs_entry()
    check_entry(model, vllm_row(), monkeypatch)


def test_page_is_listed_in_readme():
    assert "docs/servers.md" in (REPO / "README.md").read_text(encoding="utf-8")
    assert Path(PAGE).is_file()
