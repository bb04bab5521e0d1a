"""Configuration envelope (docs/definitions.md §7): enumeration and validity, SafetyRepro App. A
rendering, a planted roster through runner → analysis → gate → GRID card, and the suite end to end
on tiny models."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
import yaml
from support.envelope_roster import SMALL
from support.paths import REPO, write

from flipgate import FlipgateError, registry
from flipgate.cards.markdown import card_markdown
from flipgate.cards.write import write_cards
from flipgate.envelope.names import ENVELOPE_ANALYSES
from flipgate.envelope.render import TEMPLATES, render
from flipgate.envelope.spec import Config, load_envelope
from flipgate.items import DatasetSpec, load_items


def test_sr_practice_envelope_counts_validity_and_tiers():
    env = load_envelope(REPO / "suites/envelope/envelopes/sr-practice.yaml", [])
    full = env.configs("truthfulqa_mc", "full")
    # per precision: free-form 4 templates x 3 decodings x 3 shots = 36, logprob greedy only
    # 4 x 3 = 12 -> 48
    assert len(full) == 3 * 48 and len(env.configs("crows_pairs", "full")) == 3 * 12
    assert not [c for c in full if c.scoring == "logprob" and not c.greedy]
    core = env.configs("truthfulqa_mc", "core")
    assert {c.template for c in core} == {"T1", "T2", "T3"} and {c.decoding for c in core} == {
        "greedy",
        "T0.3",
    }
    assert len(core) == 3 * (3 * 2 * 3 + 3 * 3)  # per precision: free-form 18 + logprob 9
    assert env.anchor("crows_pairs").scoring == "logprob" and len(env.sha256) == 64


@pytest.mark.parametrize(
    "change,needle",
    [
        (("[greedy]", "[greedy, T9]"), "axes.decoding[1]: unknown decoding (value: 'T9')"),
        (
            ("axes:", "roster: [ghost]\naxes:"),
            "roster[0]: no model with this id in models.yaml (value: 'ghost')",
        ),
        (
            ("axes:", "tiers: {stress: {template: [T4]}}\naxes:"),
            "tiers.stress.template: value not on the axis",
        ),
        (("[T1, T3]", "[T1, T7]"), "axes.template[1]"),
        (("[arc_easy]", "[arc_easyy]"), "unknown dataset 'arc_easyy'"),
    ],
)
def test_bad_envelope_file_names_field_and_value(tmp_path, change, needle):
    path = write(tmp_path / "env.yaml", SMALL.replace(*change))
    with pytest.raises(FlipgateError) as err:
        load_envelope(path, ["m"])
    assert str(path) in str(err.value) and needle in str(err.value)


def test_templates_render_options_exemplars_and_cot():
    item, *exemplars = load_items(DatasetSpec("arc_easy"), 4)
    t1 = render(item, Config("T1", "greedy", 0, "free_form", "fp32"), exemplars, 0, ())
    assert (
        t1.messages[0][1]
        == f"{item.question.strip()}\nA. {item.options[0]}"
        + "".join(f"\n{chr(66 + i)}. {o}" for i, o in enumerate(item.options[1:]))
        and t1.answer_prefix == "Answer:"
    )
    t3 = render(item, Config("T3", "greedy", 3, "logprob", "fp32"), exemplars, 0, ())
    prompt = t3.messages[0][1]
    assert prompt.count("The following is a multiple-choice question") == 4
    # both scorings send one request (the greedy variant reads text and letter log-probs)
    assert t3 == render(item, Config("T3", "greedy", 3, "free_form", "fp32"), exemplars, 0, ())
    t4_logprob = render(item, Config("T4", "greedy", 0, "logprob", "fp32"), [], 0, ())
    assert t4_logprob.max_new_tokens == 1 and t4_logprob.answer_prefix == "Answer:"
    assert prompt.count("\nAnswer: ") == 3 and f"Answer: {'ABCDE'[exemplars[0].gold]}" in prompt
    t4 = render(item, Config("T4", "greedy", 0, "free_form", "fp32"), [], 0, ())
    assert (
        t4.answer_prefix == ""
        and t4.max_new_tokens == 160
        and t4.messages[0][1].startswith(TEMPLATES["T4"][:20])
    )


def test_planted_roster_metrics_gate_and_card(roster_cell):
    cell, tmp_path = roster_cell
    with pytest.raises(
        pytest.fail.Exception, match=r"t1fan: rho_flip_max\[facet=envelope\] <= 0.25"
    ):
        cell.run()
    analysis = cell.auditor.store.analysis(ENVELOPE_ANALYSES, "arc_easy")
    assert (
        analysis["n_configs"] == 8 and analysis["anchor"]["id"] == "T1|greedy|0shot|free_form|fp32"
    )
    good, t1 = analysis["models"]["good"], analysis["models"]["t1fan"]
    assert good["min"] == good["max"] == 1.0 and good["sdi"]["estimate"] == 0.0
    assert t1["point_score"] == 1.0 and t1["mean"] == 0.5
    assert t1["sdi"]["estimate"] == pytest.approx(2.0)  # (1 - 0) / 0.5
    assert t1["cfr@0.5"]["estimate"] == pytest.approx(2 * 8 / 7 * 0.25)  # n=8, p=1/2
    pairs = {(p["model_a"], p["model_b"]): p for p in analysis["roster"]["pairs"]}
    assert pairs[("t1fan", "t3fan")]["rho_flip"] == 0.5 == pairs[("t1fan", "t3fan")]["ceiling"]
    assert pairs[("good", "t1fan")]["rho_flip"] == 0.0 and pairs[("good", "t1fan")]["n_zero"] == 4
    assert analysis["roster"]["orderings_reached"]["estimate"] == pytest.approx(2 / 6)
    assert analysis["variance"]["eta_model"] is not None or "not_estimable" in analysis["variance"]
    # the two scorings of a configuration send one request: half the trials come from the cache
    trials = cell.auditor.store.trials(model_id="good")
    assert len(trials) == 8 * 6 and trials["from_cache"].sum() == 4 * 6
    verdicts = {(m, v.metric): v.verdict for m, _, v in cell.auditor.store.all_verdicts()}
    assert verdicts == {
        ("good", "rho_flip_max"): "pass",
        ("good", "cfr@0.5"): "pass",
        ("t1fan", "rho_flip_max"): "fail",
        ("t1fan", "cfr@0.5"): "pass",
        ("t3fan", "rho_flip_max"): "fail",
        ("t3fan", "cfr@0.5"): "pass",
    }  # flip_rate: not envelope
    written = write_cards(
        cell.auditor.store, tmp_path / "cards", "r1", 200, suites=registry.suites()
    )
    card = json.loads((tmp_path / "cards/t1fan/arc_easy.json").read_text())
    env = card["envelope"]
    assert card["axis_receipt"]["envelope_rules_sha256"] == cell.envelope.sha256
    assert card["scores"]["accuracy_canonical"]["estimate"] == 1.0 and len(env["configs"]) == 8
    assert env["ranking_stability"]["models"] == ["good", "t1fan", "t3fan"]
    assert math.isclose(env["score_neighbourhood"]["sdi"]["estimate"], 2.0)
    md = card_markdown(card, registry.suites())
    assert "## Configuration envelope" in md and "t1fan vs t3fan | 4 | 4 | 0 | 0.500" in md
    assert len([p for p in written.paths if p.suffix == ".json"]) == 3
    from huggingface_hub import ModelCardData
    from huggingface_hub.repocard_data import model_index_to_eval_results

    index = yaml.safe_load((tmp_path / "cards/t1fan/model-index.yaml").read_text())
    name, results = model_index_to_eval_results(index["model-index"])
    ModelCardData(model_name=name, eval_results=results)
    assert {r.metric_type for r in results} >= {"accuracy", "sdi", "cfr"}


@pytest.mark.slow
def test_suite_runs_the_envelope_on_tiny_models(tiny_model_dir, tmp_path):
    from support.suite_runs import run_suite

    models = write(
        tmp_path / "models.yaml",
        f"""
models:
  - {{id: tiny-a, backend: hf, source: {{path: "{tiny_model_dir}"}}, max_new_tokens: 3,
     suites: [envelope]}}
  - {{id: tiny-b, backend: hf, source: {{path: "{tiny_model_dir}"}}, max_new_tokens: 3,
     suites: [envelope], decoding: {{temperature: 0}}}}
""",
    )
    envelope = write(tmp_path / "env.yaml", SMALL.replace("[fp32]", "[fp32, bf16]"))
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        """
thresholds:
  - {metric: rho_flip_max, facet: envelope, max: 0.5, rule: point}
  - {metric: parse_rate, min: 0.0}
""",
    ).parent
    proc = run_suite(tmp_path, models, thresholds, "-n", "2", envelope=envelope)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (
        "1 passed" in proc.stdout and "skipped" in proc.stdout
    )  # the order suites: no model lists them
    for model in ("tiny-a", "tiny-b"):
        card = json.loads((tmp_path / f"cards/{model}/arc_easy.json").read_text())
        assert card["envelope"]["n_configs"] == 16 and card["thresholds"][0]["verdict"] == "pass"
    (store,) = (tmp_path / "runs").glob("*/trials.sqlite")  # the live display's plan was exact
    planned, measured = (
        sqlite3.connect(store)
        .execute("SELECT (SELECT SUM(trials) FROM planned), (SELECT COUNT(*) FROM trials)")
        .fetchone()
    )
    assert planned == measured > 0
    assert f"flipgate: progress {planned}/{planned} trials (100%)" in proc.stderr
    results = [json.loads(p.read_text()) for p in (tmp_path / "allure").glob("*-result.json")]
    assert any(
        lab["value"] == "configuration envelope" for r in results for lab in r.get("labels", [])
    )


def test_headline_maxima_carry_max_statistic_intervals(roster_cell):
    cell, _ = roster_cell
    with pytest.raises(pytest.fail.Exception):
        cell.run()
    head = cell.auditor.store.analysis(ENVELOPE_ANALYSES, "arc_easy")["headline_max"]
    assert head["sdi"]["estimate"] == pytest.approx(2.0) and head["sdi"]["model"] in (
        "t1fan",
        "t3fan",
    )
    lo, hi = head["sdi"]["ci"]
    assert lo <= 2.0 <= hi or hi == pytest.approx(2.0)
