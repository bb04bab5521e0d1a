import copy
import json

import jsonschema
import pytest
import yaml

from flipgate.cards import build_card, validate_card, write_cards
from flipgate.cards.build import card_markdown

from test_audit_runner import ScriptedBackend, make_auditor


@pytest.fixture
def card_store(tmp_path):
    auditor = make_auditor(tmp_path, ScriptedBackend())
    auditor.store.add_model("scripted", {"backend": "scripted", "weights_sha256": "abc", "source": None},
                            {"readouts": ["letter_logprob", "regex"], "primary_readout": "regex"})
    auditor.trials("scripted", "arc_challenge", "option_order")
    auditor.trials("scripted", "arc_challenge", "same_ordering:option_order")
    auditor.store.add_verdicts("scripted", "arc_challenge", "option_order", [
        {"threshold": "flip_rate <= 0.2 (lower)", "metric": "flip_rate", "rule": "lower", "verdict": "fail",
         "estimate": 1.0, "ci": [1.0, 1.0]}])
    return auditor.store


def test_card_is_schema_valid_and_reproducible(card_store):
    card = build_card(card_store, "scripted", "arc_challenge", "r1", n_boot=200)
    validate_card(card)
    oo = card["order_robustness"]["option_order"]["regex"]
    assert oo["flip_rate"]["estimate"] == 1.0 and oo["n_items"] == 5 and oo["k"] == 6
    ctrl = card["controls"]["same_ordering:option_order"]["regex"]
    assert ctrl["delta_order"]["estimate"] == 1.0 and ctrl["flip_rate_same"]["estimate"] == 0.0
    assert card["axis_receipt"]["manifest_sha256"]["option_order"]
    assert card["thresholds"][0]["verdict"] == "fail"
    again = build_card(card_store, "scripted", "arc_challenge", "r1", n_boot=200)
    assert again["order_robustness"] == card["order_robustness"]
    assert "| option_order | regex | 5 | 6 | 1.000" in card_markdown(card)


@pytest.mark.parametrize("mutate", [
    lambda c: c.pop("axis_receipt"),
    lambda c: c["order_robustness"]["option_order"]["regex"].pop("flip_rate"),
    lambda c: c["order_robustness"]["option_order"]["regex"]["flip_rate"].update(ci=[0.1]),
    lambda c: c["thresholds"][0].update(verdict="maybe"),
    lambda c: c.update(schema_version="grid-card/9"),
])
def test_schema_rejects_bad_cards(card_store, mutate):
    card = copy.deepcopy(build_card(card_store, "scripted", "arc_challenge", "r1", n_boot=200))
    mutate(card)
    with pytest.raises(jsonschema.ValidationError):
        validate_card(card)


def test_write_cards_and_model_index(card_store, tmp_path):
    written = write_cards(card_store, tmp_path / "cards", "r1", n_boot=200)
    assert {p.name for p in written} == {"arc_challenge.json", "arc_challenge.md", "model-index.yaml"}
    validate_card(json.loads((tmp_path / "cards/scripted/arc_challenge.json").read_text()))
    index = yaml.safe_load((tmp_path / "cards/scripted/model-index.yaml").read_text())
    from huggingface_hub import ModelCardData
    from huggingface_hub.repocard_data import model_index_to_eval_results

    name, results = model_index_to_eval_results(index["model-index"])
    assert name == "scripted"
    assert any(r.metric_type == "flip_rate" and r.metric_value == 1.0 for r in results)
    ModelCardData(model_name=name, eval_results=results)
    assert not list((tmp_path / "cards/scripted").glob("*.tmp"))


def test_card_carries_bh_q_values(card_store):
    from flipgate.cards.build import q_values

    card_store.add_verdicts("scripted", "arc_challenge", "same_ordering:option_order", [
        {"threshold": "delta_order <= 0.1 (lower)", "metric": "delta_order", "rule": "lower", "verdict": "fail",
         "estimate": 1.0, "ci": [1.0, 1.0], "p_value": 0.01, "facet": "same_ordering:option_order"},
        {"threshold": "parse_rate >= 0.9 (upper)", "metric": "parse_rate", "rule": "upper", "verdict": "pass",
         "estimate": 1.0, "ci": [1.0, 1.0], "p_value": 0.04, "facet": "same_ordering:option_order"}])
    assert sorted(q_values(card_store).values()) == pytest.approx([0.02, 0.04])
    card = build_card(card_store, "scripted", "arc_challenge", "r1", n_boot=200, qvals=q_values(card_store))
    by_threshold = {v["threshold"]: v for v in card["thresholds"]}
    assert by_threshold["delta_order <= 0.1 (lower)"]["q_value"] == pytest.approx(0.02)
    assert by_threshold["flip_rate <= 0.2 (lower)"]["q_value"] is None  # no p-value recorded
    validate_card(card)


def test_card_k_policies_section(card_store):
    card = build_card(card_store, "scripted", "arc_challenge", "r1", n_boot=200)
    block = card["order_robustness"]["option_order"]["regex"]
    assert [r["cost"] for r in block["k_policies"]] == [1, 2, 3, 6, 6, 6]
    # always-"A" flips every item by K=6; the K=2 screen catches those whose first two orderings differ
    assert block["k_ablation"]["6"] == 1.0 and block["k2_screen_recall"] == block["k_ablation"]["2"] > 0
    assert "### K-policies: option_order (regex)" in card_markdown(card)
