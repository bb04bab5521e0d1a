"""The project's own tests' fixtures; what they share that is not a fixture is in tests/support/."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from support.paths import REPO
from support.tiny_models import olmo_tokenizer
from support.xdist_groups import pytest_collection_modifyitems  # noqa: F401  (a hook)

# XLA programs one test process compiles (an ODI fit, a subprocess audit's fit) are kept for the
# others on this machine (the suite's xdist workers and the audits they start), ~10 s a fit here
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(REPO / ".flipgate_cache" / "tests-jax"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")


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
