import copy
import json

import jsonschema
import pytest
import yaml
from huggingface_hub import ModelCard
from support.auditors import make_auditor
from support.cards import two_model_grid, typed
from support.scripted import ScriptedBackend
from support.suites import SUITES

from flipgate.cards import build_card, validate_card, write_cards
from flipgate.cards.markdown import card_markdown
from flipgate.exitcodes import USAGE_ERROR
from flipgate.items import DatasetSpec
from flipgate.order.measure import order_cells
from flipgate.results import CellSummary


def test_card_is_schema_valid_and_reproducible(card_store):
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    validate_card(card)
    oo = card["order_robustness"]["option_order"]["regex"]
    assert oo["flip_rate"]["estimate"] == 1.0 and oo["n_items"] == 5 and oo["k"] == 6
    ctrl = card["controls"]["same_ordering:option_order"]["regex"]
    assert ctrl["delta_order"]["estimate"] == 1.0 and ctrl["flip_rate_same"]["estimate"] == 0.0
    assert card["axis_receipt"]["manifest_sha256"]["option_order"]
    assert card["thresholds"][0]["verdict"] == "fail"
    again = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    assert again["order_robustness"] == card["order_robustness"]
    assert "| option_order | regex | 5 | 6 | 1.000" in card_markdown(card, SUITES)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c.pop("axis_receipt"),
        lambda c: c["order_robustness"]["option_order"]["regex"].pop("flip_rate"),
        lambda c: c["order_robustness"]["option_order"]["regex"]["flip_rate"].update(ci=[0.1]),
        lambda c: c["thresholds"][0].update(verdict="maybe"),
        lambda c: c.update(schema_version="grid-card/9"),
    ],
)
def test_schema_rejects_bad_cards(card_store, mutate):
    card = copy.deepcopy(
        build_card(
            card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
        ).to_data()
    )
    mutate(card)
    with pytest.raises(jsonschema.ValidationError):
        validate_card(card)


def test_write_cards_and_model_index(card_store, tmp_path):
    written = write_cards(card_store, tmp_path / "cards", "r1", n_boot=200, suites=SUITES)
    assert {p.name for p in written.paths} == {
        "arc_challenge.json",
        "arc_challenge.md",
        "model-index.yaml",
    }
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
    card_store.add_verdicts(
        "scripted",
        "arc_challenge",
        "same_ordering:option_order",
        typed(
            [
                {
                    "threshold": "delta_order <= 0.1 (lower)",
                    "metric": "delta_order",
                    "rule": "lower",
                    "verdict": "fail",
                    "estimate": 1.0,
                    "ci": [1.0, 1.0],
                    "p_value": 0.01,
                    "facet": "same_ordering:option_order",
                },
                {
                    "threshold": "parse_rate >= 0.9 (upper)",
                    "metric": "parse_rate",
                    "rule": "upper",
                    "verdict": "pass",
                    "estimate": 1.0,
                    "ci": [1.0, 1.0],
                    "p_value": 0.04,
                    "facet": "same_ordering:option_order",
                },
            ]
        ),
    )
    assert sorted(card_store.adjust_q_values()) == pytest.approx([0.02, 0.04])
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    by_threshold = {v["threshold"]: v for v in card["thresholds"]}
    assert by_threshold["delta_order <= 0.1 (lower)"]["q_value"] == pytest.approx(0.02)
    assert by_threshold["flip_rate <= 0.2 (lower)"]["q_value"] is None  # no p-value recorded
    validate_card(card)


def test_card_k_policies_section(card_store):
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    block = card["order_robustness"]["option_order"]["regex"]
    assert [r["cost"] for r in block["k_policies"]] == [1, 2, 3, 6, 6, 6]
    # always-"A" flips every item by K=6; the K=2 screen catches those whose first two
    # orderings differ
    assert (
        block["k_ablation"]["6"] == 1.0
        and block["k2_screen_recall"] == block["k_ablation"]["2"] > 0
    )
    assert "### K-policies: option_order (regex)" in card_markdown(card, SUITES)


def _table_rows(md: str) -> list[list[str]]:
    """Each Markdown table as its rows' cell counts, splitting only on unescaped pipes (GFM)."""
    tables, current = [], []
    for line in md.splitlines() + [""]:
        if not line.startswith("|"):
            if current:
                tables.append(current)
            current = []
            continue
        cells, i, n = 0, 0, len(line)
        while i < n:
            if line[i] == "\\":
                i += 2
                continue
            cells += line[i] == "|"
            i += 1
        current.append(cells)
    return tables


def test_markdown_escapes_user_strings(card_store):
    from flipgate.markdown_text import md_escape

    evil = "main|<script>alert(1)</script>"
    card_store.add_model(
        "scripted",
        {
            "backend": "scripted",
            "weights_sha256": "abc",
            "revision": evil,
            "source": "/models/a|b <img src=x onerror=alert(1)>",
        },
        {"readouts": ["letter_logprob", "regex"], "primary_readout": "regex"},
    )
    card_store.add_verdicts(
        "scripted",
        "arc_challenge",
        "option_order",
        typed(
            [
                {
                    "threshold": "flip_rate <= 0.2 | `x` <b>",
                    "metric": "flip_rate",
                    "rule": "lower",
                    "verdict": "fail",
                    "estimate": 1.0,
                    "ci": [1.0, 1.0],
                    "why": "release bar | see <a href=x>policy</a>\nline two & more",
                }
            ]
        ),
    )
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    assert card["axis_receipt"]["model_revision"] == evil
    assert {v["threshold"]: v["why"] for v in card["thresholds"]}[
        "flip_rate <= 0.2 (lower)"
    ] is None
    card["model"]["id"] = "acme|model`x`"
    card["dataset"]["name"] = "arc|<img src=x onerror=alert(1)>"
    validate_card(card)
    md = card_markdown(card, SUITES)
    for needle in ("<script", "<img", "<a ", "<b>", "onerror=alert(1)>", "`x`"):
        assert needle not in md, needle
    for rows in _table_rows(md):
        assert len(set(rows)) == 1, rows  # every row has the header's number of columns
    assert "| model_revision | main\\|&lt;script&gt;alert(1)&lt;/script&gt; |" in md
    assert "release bar \\| see &lt;a href=x&gt;policy&lt;/a&gt;<br>line two &amp; more |" in md
    assert md.startswith("# GRID card: acme\\|model\\`x\\` on arc\\|&lt;img")
    assert (
        md_escape(None) == "–"
        and md_escape("a\\|b") == "a\\\\\\|b"
        and md_escape("x\r\ny") == "x<br>y"
    )


def test_verdict_why_in_card_json_and_markdown(card_store):
    card_store.add_verdicts(
        "scripted",
        "arc_challenge",
        "option_order",
        typed([{"why": "users see a different answer if the options move"}]),
    )
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    assert card["thresholds"][0]["why"] == "users see a different answer if the options move"
    md = card_markdown(card, SUITES)
    assert "| cell | threshold | estimate | CI | deciding test | p | BH q | verdict | why |" in md
    assert "| **fail** | users see a different answer if the options move |" in md
    bad = copy.deepcopy(card)
    bad["thresholds"][0]["why"] = 3
    with pytest.raises(jsonschema.ValidationError):
        validate_card(bad)


def test_model_index_keeps_datasets_of_earlier_runs(tmp_path):
    from flipgate.cards.write import StaleCardWarning

    out = tmp_path / "cards"
    first = make_auditor(tmp_path / "a", ScriptedBackend(), run_id="r1")
    first.store.add_model(
        "scripted", {"backend": "scripted", "weights_sha256": "abc"}, {"readouts": ["regex"]}
    )
    first.config.facets["option_order"].append(DatasetSpec("mmlu"))
    for dataset in ("arc_challenge", "mmlu"):
        order_cells(first).trials("scripted", dataset, "option_order")
    write_cards(first.store, out, "r1", n_boot=200, suites=SUITES)
    (out / "scripted/old_broken.json").write_text(json.dumps({"schema_version": "grid-card/0.0"}))
    (out / "scripted/truncated.json").write_text("{")
    second = make_auditor(tmp_path / "b", ScriptedBackend(), run_id="r2")  # a partial run: -k arc
    second.store.add_model(
        "scripted", {"backend": "scripted", "weights_sha256": "abc"}, {"readouts": ["regex"]}
    )
    order_cells(second).trials("scripted", "arc_challenge", "option_order")
    with pytest.warns(StaleCardWarning) as caught:
        written = write_cards(second.store, out, "r2", n_boot=200, suites=SUITES)
    assert {p.name for p in written.paths} == {
        "arc_challenge.json",
        "arc_challenge.md",
        "model-index.yaml",
    }
    assert sorted(str(w.message).split(" left out")[0].rsplit("/", 1)[1] for w in caught) == [
        "old_broken.json",
        "truncated.json",
    ]
    index = yaml.safe_load((out / "scripted/model-index.yaml").read_text())
    assert [r["dataset"]["name"] for r in index["model-index"][0]["results"]] == [
        "arc_challenge",
        "mmlu",
    ]
    assert json.loads((out / "scripted/arc_challenge.json").read_text())["run"]["run_id"] == "r2"


def test_card_shows_the_summaries_the_cell_test_stored(card_store):
    """Cards read each cell's stored summary (computed once, by the cell's test); only a cell
    with trials but no stored summary is summarised when the card is built."""
    first = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    planted = copy.deepcopy(first["order_robustness"]["option_order"]["regex"])
    planted["flip_rate"] = {"estimate": 0.125, "ci": [0.0, 0.25]}  # not what the trials give
    card_store.add_summaries(
        "scripted", "arc_challenge", "option_order", {"regex": CellSummary.model_validate(planted)}
    )
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    assert card["order_robustness"]["option_order"]["regex"] == planted
    computed = card["order_robustness"]["option_order"]["letter_logprob"]  # nothing stored
    assert computed == first["order_robustness"]["option_order"]["letter_logprob"]
    assert computed["flip_rate"]["estimate"] == 1.0


def test_the_suites_give_their_headline_metrics_to_the_model_index():
    """The envelope's SDI and CFR and the ODI fit's σ_π reach model-index.yaml through the
    suites (TypedCardSuite.model_index_metrics): flipgate.cards names neither."""
    from flipgate import registry
    from flipgate.cards.write import model_index

    card = {
        "axis_receipt": {"scoring_path": {"primary_readout": {}}},
        "scores": {"accuracy_canonical": {"estimate": 0.5}},
        "order_robustness": {},
        "controls": {},
        "dataset": {"name": "truthfulqa_mc"},
        "envelope": {
            "name": "default",
            "n_configs": 12,
            "score_neighbourhood": {"sdi": {"estimate": 0.25}},
            "verdict_stability": {"cfr@0.5": {"estimate": 0.1}},
        },
        "odi": {"panel": ["a", "b"], "facets": {"option_order": {"sigma_pi": {"median": 0.7}}}},
    }
    metrics = model_index("m", [card], registry.suites())["model-index"][0]["results"][0]
    assert [(m["type"], m["value"]) for m in metrics["metrics"]] == [
        ("accuracy", 0.5),
        ("sdi", 0.25),
        ("cfr", 0.1),
        ("odi_sigma_pi", 0.7),
    ]
    assert [m["name"] for m in metrics["metrics"]][1:] == [
        "SDI over 12 configurations (default)",
        "CFR at θ=0.5 (default)",
        "ODI σ_π option_order (panel of 2)",
    ]


# ------------------------------------------------- python -m flipgate card with several models


def card(*args) -> int:
    from flipgate.__main__ import main

    return main(["card", *map(str, args)])


def test_card_into_one_file_with_two_models_asks_which(tmp_path, capsys):
    grid = two_model_grid(tmp_path)
    readme = tmp_path / "README.md"
    assert card("--into", readme, "--grid-cards-dir", grid) == USAGE_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"flipgate: {grid}: holds 2 models "), err
    assert "(acme/other, scripted)" in err and "--model" in err and "--into DIR/" in err, err
    assert not readme.exists()
    # the single-file form with --model is one model's card
    assert card("--into", readme, "--grid-cards-dir", grid, "--model", "acme/other") == 0
    assert ModelCard.load(readme).data.model_name == "acme/other"


def test_card_into_dir_writes_one_model_card_per_model(tmp_path, capsys):
    grid = two_model_grid(tmp_path)
    out = tmp_path / "model_cards"  # does not exist yet: the trailing / makes it a directory
    assert card("--into", f"{out}/", "--grid-cards-dir", grid) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"flipgate: {out / model / 'README.md'}: GRID section of {model} (1 dataset) and "
        "model-index merged"
        for model in ("acme/other", "scripted")
    ]
    for model in ("acme/other", "scripted"):
        text = (out / model / "README.md").read_text()
        loaded = ModelCard.load(out / model / "README.md")
        assert loaded.data.model_name == model and loaded.data.eval_results
        assert f"`{grid.name}/{model}/<dataset>.md`" in text  # its own cards, no other model's
    first = {p: p.read_text() for p in out.rglob("README.md")}
    # an existing directory needs no trailing /; a rerun is idempotent; --model picks one
    assert card("--into", out, "--grid-cards-dir", grid, "--model", "scripted") == 0
    assert {p: p.read_text() for p in out.rglob("README.md")} == first


def test_card_into_dir_writes_nothing_when_one_card_fails(tmp_path, capsys):
    from flipgate.exports.model_card import BEGIN

    grid = two_model_grid(tmp_path)
    out = tmp_path / "model_cards"
    broken = out / "scripted" / "README.md"
    broken.parent.mkdir(parents=True)
    broken.write_text(f"text\n{BEGIN}\nno end marker\n")
    assert card("--into", out, "--grid-cards-dir", grid) == USAGE_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"flipgate: {broken}: expected one") and err.count("\n") == 1, err
    assert not (out / "acme").exists()  # acme/other's card, rendered first, was not written
    assert broken.read_text() == f"text\n{BEGIN}\nno end marker\n"


def test_the_receipt_says_how_the_dtype_was_chosen(card_store):
    """A local model's ``dtype: auto`` choice reaches the card's JSON and markdown; a model
    without one (an API model, a replay) has neither the field nor the row."""
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    assert "dtype_choice" not in card["axis_receipt"]
    assert "dtype chosen" not in card_markdown(card, SUITES)
    why = "auto: CPU without native bf16 (torch CPU kernels AVX2) -> float32"
    card_store.add_model(
        "scripted",
        {"backend": "hf", "weights_sha256": "abc", "dtype": "float32", "dtype_choice": why},
        {"readouts": ["letter_logprob", "regex"], "primary_readout": "regex"},
    )
    card = build_card(
        card_store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    validate_card(card)
    assert card["axis_receipt"]["dtype"] == "float32"
    assert card["axis_receipt"]["dtype_choice"] == why
    assert f"| dtype chosen | {why.replace('>', '&gt;')} |" in card_markdown(card, SUITES)
