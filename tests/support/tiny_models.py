"""Tiny random models built offline (tests/conftest.py builds them once per session): their
tokenizer, their models.yaml entries and an Auditor over the tiny LLaVA."""

from __future__ import annotations

import importlib.util
from pathlib import Path


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
