"""A store with one scripted cell's trials and verdicts, and typed verdicts, for the card tests."""

from __future__ import annotations

from pathlib import Path

from flipgate.cards import write_cards
from flipgate.order.measure import order_cells
from flipgate.results import Verdict
from support.auditors import make_auditor
from support.scripted import ScriptedBackend
from support.suites import SUITES


def typed(verdicts: list[dict]) -> list[Verdict]:
    """Stored verdicts from the fields a test cares about: by default a failed
    ``flip_rate <= 0.2 (lower)`` with estimate 1.0 and CI [1, 1]."""
    filled = {
        "threshold": "flip_rate <= 0.2 (lower)",
        "metric": "flip_rate",
        "rule": "lower",
        "verdict": "fail",
        "estimate": 1.0,
        "ci": [1.0, 1.0],
        "bound": 0.2,
        "direction": "max",
        "level": 0.95,
        "readout": "regex",
        "source": "test.yaml#1",
    }
    return [Verdict(**{**filled, "outcome": d.get("verdict", "fail"), **d}) for d in verdicts]


def scripted_card_store(tmp_path):
    """A store with one scripted model's option-order cell and its control, and a failed verdict."""
    auditor = make_auditor(tmp_path, ScriptedBackend())
    auditor.store.add_model(
        "scripted",
        {"backend": "scripted", "weights_sha256": "abc", "source": None},
        {"readouts": ["letter_logprob", "regex"], "primary_readout": "regex"},
    )
    order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    order_cells(auditor).trials("scripted", "arc_challenge", "same_ordering:option_order")
    auditor.store.add_verdicts(
        "scripted",
        "arc_challenge",
        "option_order",
        typed([{}]),
    )
    return auditor.store


def two_model_grid(tmp_path, models=("scripted", "acme/other")) -> Path:
    """``tmp_path/grid_cards`` as an audit of two models leaves it (by default ``scripted`` and
    ``acme/other``, a Hugging Face org/name id, nested), each with its arc_challenge card and
    model-index.yaml."""
    auditor = make_auditor(tmp_path / "run", ScriptedBackend())
    for model in models:
        auditor.config.models[model] = {**auditor.config.models["scripted"], "id": model}
        auditor._backends[model] = ScriptedBackend(model)
        auditor.store.add_model(
            model,
            {"backend": "scripted", "weights_sha256": model, "source": None},
            {"readouts": ["letter_logprob", "regex"], "primary_readout": "regex"},
        )
        order_cells(auditor).trials(model, "arc_challenge", "option_order")
    write_cards(auditor.store, tmp_path / "grid_cards", "r1", n_boot=200, suites=SUITES)
    return tmp_path / "grid_cards"
