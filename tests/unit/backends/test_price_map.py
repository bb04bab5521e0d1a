"""flipgate.backends.price_map answers as litellm 1.106.2 does, without importing it: the price of
one input and one output token for every chat model of litellm's bundled price map, under every
spelling a models.yaml may use, and the decoding parameters litellm lets through to a served
model."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from support.paths import REPO

from flipgate.backends import price_map
from flipgate.backends.price_map import (
    OPENAI_COMPATIBLE_PARAMS,
    compatible_params,
    litellm_price,
    map_price,
    native_price,
)

#: self-hosted servers' names: litellm raises for each (no price), or prices it at 0 where a
#: fallback_generalizations rule of its map describes the name
SELF_HOSTED = [
    "openai/smollm2",
    "openai/llama3.2:3b",
    "openai/Qwen/Qwen2.5-7B-Instruct",
    "openai/meta-llama/Llama-3.1-8B-Instruct",
    "openai/guarded",
    "openai/gpt-oss-20b",
    "openai/google/gemini-3-flash-local",
    "openai/",
    "hosted_vllm/Qwen/Qwen2.5-7B-Instruct",
    "hosted_vllm/x",
    "hosted_vllm/smollm2",
    "hosted_vllm/gpt-4o-mini",
    "hosted_vllm/claude-sonnet-4-5",
    "hosted_vllm/org/claude-newname-5",
    "hosted_vllm/",
    "anthropic/claude-newname-5",
    "anthropic/claude-2",
    "smollm2",
    "OPENAI/gpt-4o-mini",
    "ollama/llama3",
    "",
]
#: the spellings a model's name takes (besides bare and ``<litellm_provider>/<name>``): asking a
#: self-hosted server for a name another provider's entry holds
SERVED_PREFIXES = ("openai", "hosted_vllm", "anthropic")
#: providers whose provider lookup in litellm starts an OAuth device flow (network): left out
AUTHENTICATING = ("github_copilot", "chatgpt")


@pytest.fixture(scope="module")
def litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def chat_names() -> list[str]:
    """Every chat model of the bundled map, bare, as ``<litellm_provider>/<name>``, as its key,
    and under each of :data:`SERVED_PREFIXES`."""
    names: set[str] = set()
    for key, entry in price_map._catalog().entries.items():
        provider = entry.get("litellm_provider", "")
        if entry.get("mode") != "chat" or provider.startswith(AUTHENTICATING):
            continue
        bare = key[len(provider) + 1 :] if key.startswith(f"{provider}/") else key
        names.update([key, bare, f"{provider}/{bare}"])
        names.update(f"{prefix}/{bare}" for prefix in SERVED_PREFIXES)
    return sorted(names)


def same(got, want) -> bool:
    if got is None or want is None:
        return got is want
    return all(math.isclose(a, b, rel_tol=1e-15, abs_tol=0.0) for a, b in zip(got, want))


def test_every_chat_model_is_priced_as_litellm_prices_it(litellm):
    names = chat_names()
    assert len(names) > 8000
    wrong, native = [], 0
    for name in names:
        got = native_price(name)
        if got is False:  # litellm answers this one (map_price asks it): nothing to compare
            continue
        native += 1
        want = litellm_price(name)
        if not same(got, want):
            wrong.append((name, got, want))
    assert not wrong, wrong[:20]
    # what the map alone answers: every name under openai/, hosted_vllm/, anthropic/ (but
    # litellm's two Anthropic text-completion models)
    asked = [
        n
        for n in names
        if n.split("/", 1)[0] in SERVED_PREFIXES
        and n.split("/", 1)[1] not in price_map.ANTHROPIC_TEXT_MODELS
        and native_price(n) is False
    ]
    assert not asked, asked[:20]
    assert native > 6000


@pytest.mark.parametrize("name", SELF_HOSTED + ["gpt-4o-mini", "claude-sonnet-4-5", "o3"])
def test_unknown_and_common_names_agree_with_litellm(litellm, name):
    assert same(map_price(name), litellm_price(name))


def test_served_names_never_ask_litellm():
    for name in SELF_HOSTED[:16] + ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5"]:
        assert native_price(name) is not False, name
    assert native_price("openai/smollm2") is None
    assert native_price("hosted_vllm/Qwen/Qwen2.5-7B-Instruct") is None
    assert native_price("openai/llama3.2:3b") is None
    assert native_price("openai/gpt-4o-mini") == native_price("gpt-4o-mini") == (1.5e-07, 6e-07)


def test_other_providers_are_asked_of_litellm(litellm):
    """A name under another provider (or a bare name the map's OpenAI and Anthropic entries do not
    hold) goes to litellm, and map_price gives its answer."""
    for name in [
        "gemini/gemini-2.0-flash",
        "deepseek/deepseek-chat",
        "smollm2",
        "anthropic/claude-2",
    ]:
        assert native_price(name) is False
        assert same(map_price(name), litellm_price(name))


def test_the_aliases_litellm_rewrites_are_litellm_s(litellm):
    assert price_map.AZURE_ALIASES == set(litellm.azure_llms) | set(litellm.azure_embedding_models)
    for name in price_map.ANTHROPIC_TEXT_MODELS:
        assert litellm.AnthropicTextConfig.is_anthropic_text_model(name)


def test_the_map_read_is_litellm_s(litellm):
    entries = price_map._catalog().entries
    assert entries == {k: dict(v) for k, v in litellm.model_cost.items()}


GENERIC = {
    "openai": ["openai/smollm2", "openai/Qwen/Qwen2.5-7B-Instruct", "openai/llama3.2:3b"],
    "hosted_vllm": [
        "hosted_vllm/Qwen/Qwen2.5-7B-Instruct",
        "hosted_vllm/smollm2",
        "hosted_vllm/x",
        "hosted_vllm/o3",
        "hosted_vllm/gpt-5",
    ],
}


@pytest.mark.parametrize("prefix", sorted(GENERIC))
def test_compatible_params_are_litellm_s_for_served_names(litellm, prefix):
    for name in GENERIC[prefix] + ["openai/gpt-oss-20b", "openai/guarded"] * (prefix == "openai"):
        assert OPENAI_COMPATIBLE_PARAMS[prefix] == set(litellm.get_supported_openai_params(name))
        assert compatible_params(name) == OPENAI_COMPATIBLE_PARAMS[prefix]
    assert len(OPENAI_COMPATIBLE_PARAMS["openai"]) == 32
    assert OPENAI_COMPATIBLE_PARAMS["hosted_vllm"] - OPENAI_COMPATIBLE_PARAMS["openai"] == {
        "thinking"
    }


def test_openai_reasoning_models_get_another_list_from_litellm(litellm):
    """Why hosted OpenAI stays on litellm: its reasoning models' parameters are not the served
    names' (no logprobs for o3, gpt-5)."""
    for name in ["openai/o3", "openai/gpt-5", "openai/gpt-5-mini"]:
        assert set(litellm.get_supported_openai_params(name)) != OPENAI_COMPATIBLE_PARAMS["openai"]


def test_compatible_params_of_other_prefixes_are_none():
    for name in ["anthropic/claude-sonnet-4-5", "gpt-4o-mini", "ollama/llama3", "", "vllm/x"]:
        assert compatible_params(name) is None


def test_pricing_an_api_model_does_not_import_litellm():
    code = (
        "from flipgate.cost import price_per_token\n"
        "print(price_per_token({'id': 'mini', 'backend': 'litellm', "
        "'source': {'model': 'openai/gpt-4o-mini'}}))\n"
        "print(price_per_token({'id': 'served', 'backend': 'litellm', "
        "'source': {'model': 'openai/smollm2', 'api_base': 'http://127.0.0.1:1/v1'}}))\n"
        "import sys, os\n"
        "print('litellm' in sys.modules, os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["(1.5e-07, 6e-07)", "None", "False True"]


def test_the_price_map_file_is_json_of_the_installed_litellm():
    folder = price_map.litellm_package_dir()
    assert folder is not None and (folder / "__init__.py").is_file()
    assert (
        json.loads((folder / price_map.PRICE_MAP_FILE).read_text())["gpt-4o-mini"][
            "litellm_provider"
        ]
        == "openai"
    )
