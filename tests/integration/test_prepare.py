"""``python -m flipgate prepare`` (make setup): every local model loaded once, so the first audit
finds its converted weights and fingerprint and loads nothing before a call needs it."""

from __future__ import annotations

import pytest
from support.paths import write
from support.tiny_models import tiny_hf_config

from flipgate.__main__ import main
from flipgate.backends.hf import HFBackend, stored_fingerprint
from flipgate.exitcodes import USAGE_ERROR


def models_yaml(tmp_path, model_dir):
    return write(
        tmp_path / "models.yaml",
        f"""\
        models:
          - id: tiny
            backend: hf
            source: {{path: "{model_dir}"}}
          - id: recorded
            backend: replay
            source: {{path: "{tmp_path / "recorded.jsonl"}"}}
        """,
    )


@pytest.mark.slow
def test_prepare_loads_each_local_model_once_and_stores_its_fingerprint(
    tmp_path, tiny_model_dir, capsys
):
    cache = tmp_path / "cache"
    status = main(["prepare", "--models", str(models_yaml(tmp_path, tiny_model_dir)),
                   "--cache-dir", str(cache)])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert status == 0
    assert len(out) == 1 and out[0].startswith("flipgate prepare: tiny ready (")  # replay: nothing
    assert len(list((cache / "fingerprints").glob("*.json"))) == 1
    cfg = tiny_hf_config(tiny_model_dir, cache, dtype="auto")  # as models.yaml: no dtype
    audit_backend = HFBackend(cfg)
    assert not audit_backend._loaded  # the audit's backend knows the model without loading it
    assert stored_fingerprint(cfg, cache)["vision"] is False  # the progress plan reads it


def test_prepare_names_a_missing_models_file(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main(["prepare", "--models", str(missing)]) == USAGE_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"flipgate: {missing}: file not found"]
