"""ODI in the suite (docs/definitions.md §4–§6): thresholds naming ``facet: odi``, their verdicts on
a hand-built fit, and a planted two-model panel through trials → fit → store → gate → GRID card →
Allure plot."""

from __future__ import annotations

import json

import pytest
from support.odi_fits import SHORT_FIT
from support.paths import write
from support.scripted import ScriptedBackend

from flipgate import FlipgateError, registry
from flipgate.calls import Auditor, Paths
from flipgate.cards.build import validate_card
from flipgate.cards.markdown import card_markdown
from flipgate.cards.write import write_cards
from flipgate.config import AuditConfig, load_thresholds
from flipgate.items import DatasetSpec, load_items
from flipgate.odi.allure import odi_plot
from flipgate.odi.cell import ODICell
from flipgate.odi.gate import diagnostic_bounds, gate, panel_checks
from flipgate.odi.names import ODI_FITS, ORDER_PANEL
from flipgate.odi.suite import SUITE as ODI_SUITE

#: every test here runs audits, servers or fits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow


def thresholds(tmp_path, body: str, name: str = "default"):
    return write(tmp_path / "thr" / f"{name}.yaml", "thresholds:\n" + body).parent


def _q(median, lo, hi):
    return {"median": median, "hdi": [lo, hi], "ci": [lo, hi]}


#: a hand-built ODI result: two facets, three cells, both fits' diagnostics
ANALYSIS = {
    "readout": "primary",
    "profile": "fast",
    "hdi_prob": 0.89,
    "facets": {
        "option_order": {"sigma_pi": _q(0.9, 0.7, 1.1), "sigma_delta": _q(0.1, 0.0, 0.2)},
        "evidence_chunk_order": {"sigma_pi": _q(0.3, 0.2, 0.6), "sigma_delta": _q(0.2, 0.0, 0.3)},
    },
    "cells": {
        "option_order/mmlu": {
            "facet": "option_order",
            "dataset": "mmlu",
            "mean_abs_delta": {"estimate": 0.05, "hdi": [0.0, 0.1], "ci": [0.0, 0.1]},
        },
        "option_order/arc_challenge": {
            "facet": "option_order",
            "dataset": "arc_challenge",
            "mean_abs_delta": {"estimate": 0.4, "hdi": [0.3, 0.5], "ci": [0.3, 0.5]},
        },
        "evidence_chunk_order/synthetic_multihop": {
            "facet": "evidence_chunk_order",
            "dataset": "synthetic_multihop",
            "mean_abs_delta": {"estimate": 0.1, "hdi": [0.0, 0.2], "ci": [0.0, 0.2]},
        },
    },
    "diagnostics": {
        "modal": {
            "rhat_max": 1.004,
            "ess_bulk_min": 900.0,
            "ess_tail_min": 700.0,
            "divergences": 0,
        },
        "correct": {
            "rhat_max": 1.02,
            "ess_bulk_min": 350.0,
            "ess_tail_min": 500.0,
            "divergences": 0,
        },
    },
}
#: model m's own fit: it ran option_order only (its σ_δ and cells), its diagnostics
ANALYSIS["models"] = {
    "m": {
        "theta": _q(0.1, -0.1, 0.3),
        "own": {
            "facets": {"option_order": {"sigma_delta": _q(0.6, 0.55, 0.7)}},
            "cells": {c: v for c, v in ANALYSIS["cells"].items() if v["facet"] == "option_order"},
            "diagnostics": {
                "modal": {
                    "rhat_max": 1.03,
                    "ess_bulk_min": 320.0,
                    "ess_tail_min": 700.0,
                    "divergences": 0,
                }
            },
        },
    }
}


def test_odi_thresholds_gate_each_facet_cell_and_outcome(tmp_path):
    """A model is gated on its own fit (σ_δ, mean |δ|, its diagnostics); σ_π and the pooled fits'
    diagnostics are panel checks naming model ``panel``."""
    ts = load_thresholds(
        thresholds(
            tmp_path,
            """
  - {metric: sigma_pi, facet: odi, max: 0.5}
  - {metric: sigma_delta@option_order, facet: odi, max: 0.5, rule: upper}
  - {metric: mean_abs_delta, facet: odi, dataset: arc_challenge, max: 0.2, rule: point}
  - {metric: ess_bulk_min, facet: odi, min: 300}
  - {metric: flip_rate, max: 0.1}
""",
        ),
        "m",
    )
    verdicts = {
        v.threshold.split(" · ")[1] + ":" + v.metric: v.verdict for v in gate(ANALYSIS, ts, "m")
    }
    assert verdicts == {
        "option_order:sigma_delta@option_order": "fail",  # own [0.55, 0.7] wholly above 0.5
        "option_order/arc_challenge:mean_abs_delta": "fail",  # point: 0.4 > 0.2
        "modal:ess_bulk_min": "pass",  # declared: 320 >= 300
        "modal:rhat_max": "fail",  # own fit: docs/definitions.md §4 default 1.01
        "modal:ess_tail_min": "pass",
        "modal:divergences": "pass",
    }
    panel = {
        v.threshold.split(" · ", 2)[2] + ":" + v.metric: v.verdict
        for v in panel_checks(ANALYSIS, [ts])
    }
    assert panel == {
        "option_order:sigma_pi": "fail",  # HDI [0.7, 1.1] wholly above 0.5
        "evidence_chunk_order:sigma_pi": "inconclusive",  # HDI [0.2, 0.6] straddles 0.5
        "modal:ess_bulk_min": "pass",
        "correct:ess_bulk_min": "pass",  # declared: 350 >= 300
        "modal:rhat_max": "pass",
        "correct:rhat_max": "fail",
        "modal:ess_tail_min": "pass",
        "correct:ess_tail_min": "pass",
        "modal:divergences": "pass",
        "correct:divergences": "pass",
    }
    assert {v.model for v in panel_checks(ANALYSIS, [ts])} == {"panel"}


def test_threshold_on_a_facet_outside_the_fit_is_missing(tmp_path):
    ts = load_thresholds(
        thresholds(
            tmp_path,
            "  - {metric: sigma_pi@image_set_order, facet: odi, max: 0.5}\n"
            "  - {metric: sigma_delta@evidence_chunk_order, facet: odi, max: 0.5}\n",
        ),
        "m",
    )
    v = next(v for v in panel_checks(ANALYSIS, [ts]) if v.metric.startswith("sigma_pi"))
    assert v.verdict == "missing" and "(not in the fit)" in v.threshold
    # the panel has evidence_chunk_order, but model m did not run it: no value of m's for it
    (mine,) = [v for v in gate(ANALYSIS, ts, "m") if v.metric.startswith("sigma_delta")]
    assert mine.verdict == "missing" and mine.target == "(not in the fit)"


def test_diagnostic_bounds_take_the_strictest_file(tmp_path):
    default = load_thresholds(
        thresholds(tmp_path, "  - {metric: rhat_max, facet: odi, max: 1.05}\n"), "a"
    )
    strict = load_thresholds(
        write(
            tmp_path / "thr" / "b.yaml",
            """thresholds:
  - {metric: ess_tail_min, facet: odi, min: 1000}
  - {metric: divergences, facet: odi, max: 3}
""",
        ).parent,
        "b",
    )
    assert diagnostic_bounds([default]) == {
        "rhat_max": 1.05,
        "ess_min": 400.0,
        "max_divergences": 0,
    }
    # b = default.yaml (R̂ 1.05) + b.yaml: ESS tail 1000 is stricter, 3 divergences is not
    assert diagnostic_bounds([default, strict]) == {
        "rhat_max": 1.05,
        "ess_min": 1000.0,
        "max_divergences": 0,
    }


@pytest.mark.parametrize(
    "line, needle",
    [
        ("{metric: sigma_pi, max: 0.5}", "go with facet: odi"),
        ("{metric: flip_rate, facet: odi, max: 0.5}", "value: metric 'flip_rate', facet 'odi'"),
        (
            "{metric: sigma_pi@colour_order, facet: odi, max: 0.5}",
            "unknown facet after '@' (value: 'sigma_pi@colour_order')",
        ),
        ("{metric: sigma_po, facet: odi, max: 0.5}", "thresholds[0].metric"),
    ],
)
def test_bad_odi_threshold_names_file_field_and_value(tmp_path, line, needle):
    directory = thresholds(tmp_path, f"  - {line}\n")
    with pytest.raises(FlipgateError) as err:
        load_thresholds(directory, "m")
    assert str(directory / "default.yaml") in str(err.value) and needle in str(err.value)


# -- a planted panel: "reader" picks the gold option's content wherever it sits (no flips);
# -- "first" always answers the first label (a position bias: its content changes with the ordering)
def _reader(gold: dict):
    def rule(req):
        question = req.messages[0][1]
        text = next(g for q, g in gold.items() if q in question)
        return next(line[0] for line in question.splitlines() if line[2:].strip() == text)

    return rule


def panel_cell(
    tmp_path, thresholds_body: str, odi_settings: dict | None = None, roster=("reader", "first")
):
    gold = {
        it.question.strip(): it.options[it.gold].strip()
        for name in ("arc_challenge", "arc_easy")
        for it in load_items(DatasetSpec(name), None, 42)
    }
    rules = {"reader": _reader(gold), "first": None, "last": lambda req: req.labels[-1]}
    backends = {m: ScriptedBackend(m, rules[m]) for m in roster}
    models = {
        m: {
            "id": m,
            "backend": "scripted",
            "readouts": ["regex", "letter_logprob"],
            "primary_readout": "regex",
            "suites": ["order"],
        }
        for m in roster
    }
    cfg = AuditConfig(
        tmp_path / "models.yaml",
        models,
        items_per_dataset=8,
        bootstrap_n=200,
        facets={"option_order": [DatasetSpec("arc_challenge"), DatasetSpec("arc_easy")]},
        plans={"odi": odi_settings or {}},
    )
    auditor = Auditor(
        cfg,
        "r1",
        Paths(
            tmp_path / "trials.sqlite",
            tmp_path / "cache.sqlite",
            tmp_path / "manifests",
            tmp_path / "models",
        ),
        progress=False,
    )
    auditor._backends.update(backends)
    return ODICell(auditor, str(thresholds(tmp_path, thresholds_body)))


PLANTED_THRESHOLDS = (
    "  - {metric: sigma_pi@option_order, facet: odi, max: 5.0}\n"
    "  - {metric: mean_abs_delta, facet: odi, max: 0.01, rule: warn}\n"
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("odi-panel")
    cell = panel_cell(tmp_path, PLANTED_THRESHOLDS)
    with pytest.warns(UserWarning, match="mean_abs_delta"):
        verdicts = cell.run()
    return cell, verdicts, tmp_path


def test_planted_panel_is_fitted_gated_and_stored(planted):
    cell, verdicts, _ = planted
    analysis = cell.auditor.store.analysis(ODI_FITS, ORDER_PANEL)
    assert analysis["roster"] == ["reader", "first"] and analysis["passed"], analysis["diagnostics"]
    # 2 models x 2 datasets x 8 items x K=6; the modal fit drops items whose answers tie
    assert analysis["sizes"]["correct"] == {
        "trials": 192,
        "models": 2,
        "items": 16,
        "cells": 2,
        "facets": 1,
        "k": 6,
    }
    assert analysis["sizes"]["modal"]["trials"] <= 192 and set(analysis["cells"]) == {
        "option_order/arc_challenge",
        "option_order/arc_easy",
    }
    theta = {m: v["theta"]["median"] for m, v in analysis["models"].items()}
    assert theta["reader"] > 0 > theta["first"]  # always right vs right only when gold sits first
    assert analysis["readouts"] == {
        "reader": {"option_order": "regex"},
        "first": {"option_order": "regex"},
    }
    by_metric = {}
    for v in verdicts:
        by_metric.setdefault((v.model, v.metric), set()).add(v.verdict)
    # each model's own |δ|: "first" has a position bias (offsets per ordering), "reader" none
    assert by_metric["first", "mean_abs_delta"] == {"warn"}
    assert by_metric["reader", "mean_abs_delta"] == {"pass"}
    assert not any(metric.startswith("sigma_pi") for _, metric in by_metric)
    assert {v.model for v in verdicts} == {"reader", "first"}
    assert len(cell.auditor.store.verdicts("first", "odi")) == len(verdicts) // 2
    # σ_π is a panel check: recorded with the fit, naming model "panel", gating no model
    checks = analysis["panel_checks"]
    sigma = [c for c in checks if c["metric"] == "sigma_pi@option_order"]
    assert [c["verdict"] for c in sigma] == ["pass"] and {c["model"] for c in checks} == {"panel"}
    for m in ("reader", "first"):
        own = analysis["models"][m]["own"]
        assert set(own["facets"]) == {"option_order"} and own["passed"], own
    # the terminal: one line per model (its own fit), one for the panel, labelled as such
    lines = ODI_SUITE.summary_lines(cell.auditor.store)
    assert [line.split(" (")[0] for line in lines] == [
        "flipgate: ODI reader",
        "flipgate: ODI first",
        "flipgate: ODI panel",
    ]
    assert "own fit" in lines[0] and "σ_δ option_order" in lines[0] and "σ_π" not in lines[0]
    assert "gates no model" in lines[2] and "σ_π option_order" in lines[2]


def test_a_rerun_on_the_same_panel_replays_the_stored_fits(planted, monkeypatch):
    cell, verdicts, tmp_path = planted

    def refit(*args, **kwargs):
        raise AssertionError("refitted")

    monkeypatch.setattr("flipgate.odi.cell.odi", refit)
    again = panel_cell(tmp_path, PLANTED_THRESHOLDS)
    with pytest.warns(UserWarning, match="mean_abs_delta"):
        replayed = again.run()
    assert [v.model_dump() for v in replayed] == [v.model_dump() for v in verdicts]
    fits = [c.auditor.store.analysis(ODI_FITS, ORDER_PANEL) for c in (again, cell)]
    assert fits[0]["models"] == fits[1]["models"]
    assert len(list((tmp_path / "analyses").glob("*.json"))) == 1
    with pytest.raises(AssertionError, match="refitted"):  # another seed is another fit
        panel_cell(tmp_path, PLANTED_THRESHOLDS, {"seed": 1}).run()


def test_planted_panel_card_section_markdown_and_plot(planted):
    cell, _, tmp_path = planted
    write_cards(cell.auditor.store, tmp_path / "cards", "r1", 200, suites=registry.suites())
    card = json.loads((tmp_path / "cards/first/arc_easy.json").read_text())
    validate_card(card)
    odi = card["odi"]
    assert odi["panel"] == ["reader", "first"] and set(odi["cells"]) == {"option_order/arc_easy"}
    assert set(odi["facets"]) == {"option_order"} and odi["theta"]["median"] < 0
    assert {v["target"] for v in odi["verdicts"]} == {"option_order/arc_easy", "modal"}
    assert {v["model"] for v in odi["verdicts"]} == {"first"}
    assert set(odi["own"]["cells"]) == {"option_order/arc_easy"}
    assert {v["target"] for v in odi["panel_checks"]} == {"option_order", "modal", "correct"}
    md = card_markdown(card, registry.suites())
    assert (
        "## ODI: ordering-decomposed IRT" in md
        and "| option_order/arc_easy |" in md
        and "→ passed" in md
        and "### Panel (pooled over every order-suite model; gates no model)" in md
    )
    assert "odi_sigma_pi" in (tmp_path / "cards/first/model-index.yaml").read_text()
    png = odi_plot(cell.auditor.store.analysis(ODI_FITS, ORDER_PANEL))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_a_fit_that_fails_its_diagnostics_fails_the_test(tmp_path):
    cell = panel_cell(
        tmp_path,
        "  - {metric: sigma_pi, facet: odi, max: 9}\n",
        {**SHORT_FIT, "num_samples": 20},
    )
    with pytest.raises(
        pytest.fail.Exception, match=r"ess_bulk_min\[facet=odi\] >= 400.0 \(point\) · modal"
    ):
        cell.run()
    assert (
        cell.auditor.store.analysis(ODI_FITS, ORDER_PANEL)["passed"] is False
    )  # the fit is still recorded


def test_one_model_roster_is_skipped_with_the_reason(tmp_path):
    cell = panel_cell(tmp_path, "  - {metric: sigma_pi, facet: odi, max: 9}\n", roster=("reader",))
    with pytest.raises(pytest.skip.Exception, match="needs ≥ 2 models in the order suites"):
        cell.run()
