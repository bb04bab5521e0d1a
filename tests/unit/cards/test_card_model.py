"""The typed card (flipgate/cards/model.py): the checked-in schema is the one generated from it,
a built card survives a round trip through the model unchanged, and the schema keeps the
constraints the hand-written one had."""

import copy

import jsonschema
import pydantic
import pytest
from support.suites import SUITES

from flipgate.cards import build_card, validate_card
from flipgate.cards.model import SCHEMA_PATH, GridCard, MetricBlock, card_schema, schema_text


def test_checked_in_schema_is_generated_from_the_model():
    assert SCHEMA_PATH.read_text() == schema_text(), "run `make schema` and commit the result"


def test_card_round_trips_through_the_model(card_store):
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    assert GridCard.model_validate(card).to_data() == card
    control = card["controls"]["same_ordering:option_order"]["regex"]
    assert "k_policies" not in control and "k2_screen_recall" not in control  # absent, not null


def test_absent_keys_are_left_out_and_nulls_kept():
    estimate = {"estimate": None, "ci": None}
    block = {m: estimate for m in ("flip_rate", "osi", "pairwise_disagreement", "parse_rate")}
    block |= {"accuracy": estimate, "acc_swing": estimate, "n_items": 0, "k": 0}
    facet = MetricBlock.model_validate({**block, "k2_screen_recall": float("nan")})
    assert facet.model_dump(mode="json")["k2_screen_recall"] is None  # given: NaN written as null
    control = MetricBlock.model_validate(block)
    assert "k2_screen_recall" not in control.model_dump(mode="json")  # not given: left out
    assert "delta_order" not in MetricBlock(**block, delta_order=None).model_dump(mode="json")


def test_schema_keeps_the_cards_constraints():
    schema = card_schema()
    defs = schema["$defs"]
    assert schema["properties"]["schema_version"]["const"] == "grid-card/0.1"
    assert set(schema["required"]) == {
        "schema_version",
        "model",
        "dataset",
        "run",
        "axis_receipt",
        "scores",
        "order_robustness",
        "controls",
        "thresholds",
        "scope",
    }
    verdict = defs["CardVerdict"]["properties"]
    assert verdict["verdict"]["enum"] == ["pass", "fail", "inconclusive", "warn", "missing"]
    assert verdict["outcome"]["enum"] == ["pass", "warn", "xfail", "fail"]
    assert verdict["direction"]["enum"] == ["max", "min"]
    assert verdict["q_value"]["maximum"] == 1 and verdict["level"]["exclusiveMaximum"] == 1
    assert defs["ReadoutComparison"]["properties"]["deltas"]["propertyNames"]["enum"] == [
        "delta_flip_rate",
        "delta_accuracy",
        "delta_parse_rate",
        "delta_delta_order",
    ]
    for absent in ("envelope", "odi", "regression"):  # left out when absent, never null
        assert schema["properties"][absent] == {"$ref": f"#/$defs/{absent.title()}Section"}


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c.update(odi=None),
        lambda c: c["run"].update(calls={"requests": -1, "retries": 0, "timeouts": 0}),
        lambda c: c["thresholds"][0].update(outcome="maybe"),
        lambda c: c["thresholds"][0].update(q_value=1.5),
        lambda c: c["scores"]["accuracy_canonical"].update(extra=1),
    ],
)
def test_schema_and_model_reject_bad_cards(card_store, mutate):
    card = copy.deepcopy(
        build_card(
            card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
        ).to_data()
    )
    mutate(card)
    with pytest.raises(jsonschema.ValidationError):
        validate_card(card)
    if card.get("odi", {}) is not None:  # the model reads a null section as an absent one
        with pytest.raises(pydantic.ValidationError):
            GridCard.model_validate(card)
