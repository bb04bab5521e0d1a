"""Regression between model versions over the configuration envelope (docs/definitions.md §11
"Envelope"): per-configuration score deltas (candidate − baseline) and ρ_flip between the two
versions, in the envelope analysis and on the GRID card — against hand-computed values."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pandas as pd
import pytest

from flipgate import metrics as M
from flipgate import registry
from flipgate.cards.build import SCHEMA_PATH
from flipgate.cards.markdown import card_markdown
from flipgate.cards.write import write_cards
from flipgate.envelope.analysis import analyse, version_deltas
from flipgate.envelope.card import envelope_markdown, envelope_section
from flipgate.envelope.names import ENVELOPE_ANALYSES

CONFIGS = [
    "T1|greedy|0shot|free_form|fp32",
    "T1|greedy|3shot|free_form|fp32",
    "T3|greedy|0shot|free_form|fp32",
    "T3|greedy|3shot|free_form|fp32",
]
# binary-exact scores so every delta is exact
PLANTED = {
    "old": [0.5, 0.5, 0.75, 0.25],
    "new": [0.75, 0.625, 0.5, 0.25],  # Δ = +0.25, +0.125, −0.25, 0 → signs + + − 0
    "other": [0.25, 0.5, 0.5, 0.5],
}


def _row(model: str, config: str, score: float) -> dict:
    template, decoding, shots, scoring, quant = config.split("|")
    return {
        "model": model,
        "benchmark": "arc_easy",
        "config": config,
        "template": template,
        "decoding": decoding,
        "few_shot": int(shots.removesuffix("shot")),
        "scoring": scoring,
        "quantization": quant,
        "tier": "core",
        "score": score,
        "parse_rate": 1.0,
        "n": 8,
        "seeds": 1,
    }


def planted_scores(extra: dict | None = None) -> pd.DataFrame:
    rows = [_row(m, c, s) for m, scores in PLANTED.items() for c, s in zip(CONFIGS, scores)]
    rows += [_row(m, c, s) for (m, c), s in (extra or {}).items()]
    return pd.DataFrame(rows)


def test_planted_deltas_counts_and_rho_flip_by_hand():
    # a fifth configuration only the candidate ran is not compared
    scores = planted_scores({("new", "T1|greedy|0shot|logprob|fp32"): 1.0})
    (v,) = version_deltas(scores, [("new", "old")], n_boot=300, seed=42, level=0.95)
    assert v["candidate"] == "new" and v["baseline"] == "old" and "missing" not in v
    assert v["n_configs"] == 4
    assert {d["config"]: d["delta"] for d in v["deltas"]} == dict(
        zip(CONFIGS, [0.25, 0.125, -0.25, 0.0])
    )
    assert [(d["candidate"], d["baseline"]) for d in v["deltas"]] == list(
        zip(PLANTED["new"], PLANTED["old"])
    )
    assert v["min_delta"] == -0.25 and v["max_delta"] == 0.25
    assert (v["n_better"], v["n_worse"], v["n_equal"]) == (2, 1, 1)
    assert v["rho_flip"] == pytest.approx(0.25)  # min(N+ = 2, N− = 1) / |C| = 1/4
    assert v["ceiling"] == pytest.approx(0.5)  # ⌊4/2⌋ / 4
    assert v["mean_delta"]["estimate"] == pytest.approx(0.125 / 4)  # (0.25 + 0.125 − 0.25 + 0) / 4
    est, lo, hi = M.config_bootstrap(
        np.array([0.25, 0.125, -0.25, 0.0]), np.mean, n=300, seed=42, level=0.95
    )
    assert v["mean_delta"]["ci"] == [pytest.approx(lo), pytest.approx(hi)]
    assert -0.25 <= lo <= est <= hi <= 0.25
    # the same pair the other way round: deltas negate, worse/better swap, ρ_flip is symmetric
    (w,) = version_deltas(scores, [("old", "new")], n_boot=300, seed=42, level=0.95)
    assert [d["delta"] for d in w["deltas"]] == [-0.25, -0.125, 0.25, 0.0]
    assert (w["n_better"], w["n_worse"], w["n_equal"]) == (1, 2, 1) and w["rho_flip"] == v[
        "rho_flip"
    ]


def test_dominated_candidate_has_rho_flip_zero_and_one_config_has_no_interval():
    scores = pd.DataFrame(
        [_row("a", c, s) for c, s in zip(CONFIGS, [0.5, 0.5, 0.5, 0.5])]
        + [_row("b", c, s) for c, s in zip(CONFIGS, [0.25, 0.5, 0.25, 0.0])]
    )
    (v,) = version_deltas(scores, [("b", "a")], 200, 42, 0.95)
    assert (v["n_worse"], v["n_better"], v["n_equal"]) == (3, 0, 1) and v["rho_flip"] == 0.0
    assert v["mean_delta"]["estimate"] == pytest.approx(-0.25)  # (−0.25 + 0 − 0.25 − 0.5) / 4
    one = pd.DataFrame(
        [_row("a", CONFIGS[0], 0.5), _row("b", CONFIGS[0], 0.75), _row("b", CONFIGS[1], 0.5)]
    )
    (u,) = version_deltas(one, [("b", "a")], 200, 42, 0.95)
    assert u["n_configs"] == 1 and u["mean_delta"] == {"estimate": 0.25, "ci": None}
    assert u["rho_flip"] == 0.0 and u["ceiling"] == 0.0


def test_missing_models_and_no_shared_configuration():
    scores = planted_scores()
    got = version_deltas(
        scores, [("new", "ghost"), ("phantom", "old"), ("new", "old")], 100, 42, 0.95
    )
    assert [(v["candidate"], v["baseline"]) for v in got] == [
        ("new", "ghost"),
        ("phantom", "old"),
        ("new", "old"),
    ]
    assert set(got[0]) == {"candidate", "baseline", "missing"} and "'ghost'" in got[0]["missing"]
    assert "baseline" in got[0]["missing"] and "candidate 'phantom'" in got[1]["missing"]
    assert "missing" not in got[2]
    disjoint = pd.DataFrame([_row("a", CONFIGS[0], 0.5), _row("b", CONFIGS[1], 0.5)])
    (v,) = version_deltas(disjoint, [("b", "a")], 100, 42, 0.95)
    assert v["missing"] == "no configuration was scored for both versions"


def test_analyse_without_pairs_is_unchanged():
    scores = planted_scores()
    dump = lambda d: json.dumps(d, sort_keys=True, default=str)  # noqa: E731  (NaN-safe comparison)
    plain = analyse(scores, CONFIGS[0], [0.5], n_boot=100)
    assert "versions" not in plain and "versions" not in analyse(
        scores, CONFIGS[0], [0.5], n_boot=100, pairs=[]
    )
    with_pairs = analyse(
        scores, CONFIGS[0], [0.5], n_boot=100, pairs=[("new", "old"), ("new", "ghost")]
    )
    versions = with_pairs.pop("versions")
    assert dump(with_pairs) == dump(plain)
    assert versions == version_deltas(scores, [("new", "old"), ("new", "ghost")], 100, 42, 0.95)


def _analysis(pairs) -> dict:
    """A hand-made envelope analysis (the fields the card reads) around planted scores."""
    scores = planted_scores()
    analysis = analyse(scores, CONFIGS[0], [0.5], n_boot=100, pairs=pairs)
    analysis.update(
        {
            "envelope": "test-envelope",
            "envelope_sha256": "a" * 64,
            "tier": "core",
            "n_configs": 4,
            "n_items": 8,
            "anchor": {"id": CONFIGS[0]},
            "axes": {"template": ["T1", "T3"]},
            "exemplar_ids": [],
            "scope_not_varied": ["seeds"],
            "configs": scores.to_dict("records"),
        }
    )
    return analysis


def _fmt(m):
    return (
        "–"
        if m is None or m["estimate"] is None
        else (
            f"{m['estimate']:.3f}"
            + (f" [{m['ci'][0]:.3f}, {m['ci'][1]:.3f}]" if m.get("ci") else "")
        )
    )


def _section(analysis: dict, model_id: str) -> dict:
    """The card's envelope section of ``model_id`` as JSON data."""
    return envelope_section(analysis, model_id).model_dump(mode="json")


def test_card_section_and_markdown_show_the_baseline_comparison():
    schema = json.loads(SCHEMA_PATH.read_text())
    envelope_schema = {**schema["properties"]["envelope"], "$defs": schema["$defs"]}
    analysis = _analysis([("new", "old"), ("other", "ghost")])
    new = _section(analysis, "new")
    (v,) = new["versions"]
    assert v["baseline"] == "old" and v["rho_flip"] == pytest.approx(0.25)
    jsonschema.Draft202012Validator(envelope_schema).validate(json.loads(json.dumps(new)))
    assert "versions" not in _section(analysis, "old")  # the baseline is no candidate
    md = "\n".join(envelope_markdown(new, _fmt))
    assert "vs baseline old over 4 shared configurations" in md
    assert f"mean Δ {_fmt(v['mean_delta'])}" in md and "min -0.250, max +0.250" in md
    assert "worse on 1, better on 2, equal on 1; ρ_flip 0.250 (ceiling 0.500)" in md
    assert "| T1\\|greedy\\|0shot\\|free_form\\|fp32 | 0.750 | 0.500 | +0.250 |" in md
    assert "| T3\\|greedy\\|3shot\\|free_form\\|fp32 | 0.250 | 0.250 | 0.000 |" in md
    other = _section(analysis, "other")
    jsonschema.Draft202012Validator(envelope_schema).validate(json.loads(json.dumps(other)))
    md_other = "\n".join(envelope_markdown(other, _fmt))
    assert (
        "vs baseline ghost: not compared (baseline 'ghost' has no configuration score" in md_other
    )
    assert "vs baseline" not in "\n".join(envelope_markdown(_section(_analysis(()), "new"), _fmt))
    bad = json.loads(json.dumps(new))
    bad["versions"][0]["missing"] = "both a reason and numbers"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(envelope_schema).validate(bad)


def test_suite_compares_a_roster_model_with_its_baseline(roster_cell):  # noqa: F811
    cell, tmp_path = roster_cell
    models = cell.auditor.config.models
    models["t1fan"]["baseline"] = "t3fan"  # in the roster: compared
    models["good"]["baseline"] = "elsewhere"  # not in the roster: not a pair
    with pytest.raises(
        pytest.fail.Exception
    ):  # t1fan / t3fan fail rho_flip_max (test_envelope_suite)
        cell.run()
    (v,) = cell.auditor.store.analysis(ENVELOPE_ANALYSES, "arc_easy")["versions"]
    # t1fan is right exactly on the T1 configurations, t3fan exactly on the T3 ones:
    # Δ = ±1 on 4 each
    assert (v["candidate"], v["baseline"], v["n_configs"]) == ("t1fan", "t3fan", 8)
    assert sorted(d["delta"] for d in v["deltas"]) == [-1.0] * 4 + [1.0] * 4
    assert (v["n_worse"], v["n_better"], v["n_equal"]) == (4, 4, 0) and v["rho_flip"] == 0.5 == v[
        "ceiling"
    ]
    assert v["mean_delta"]["estimate"] == 0.0 and v["min_delta"] == -1.0 and v["max_delta"] == 1.0
    write_cards(
        cell.auditor.store, tmp_path / "cards", "r1", 200, suites=registry.suites()
    )  # schema-validated
    card = json.loads((tmp_path / "cards/t1fan/arc_easy.json").read_text())
    assert card["envelope"]["versions"][0]["baseline"] == "t3fan"
    assert (
        "versions"
        not in json.loads((tmp_path / "cards/good/arc_easy.json").read_text())["envelope"]
    )
    md = card_markdown(card, registry.suites())
    assert "vs baseline t3fan over 8 shared configurations" in md
    assert "worse on 4, better on 4, equal on 0; ρ_flip 0.500 (ceiling 0.500)" in md
