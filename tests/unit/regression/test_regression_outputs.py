"""Regression outputs (docs/definitions.md §11): the Allure report, the GRID card's regression
section, regression.md and ``python -m flipgate card --into README.md``, from a comparison of two
scripted model versions."""

import json

import pytest
import yaml
from support.auditors import make_auditor
from support.scripted import ScriptedBackend

from flipgate import registry
from flipgate.cards import validate_card, write_cards
from flipgate.cards.markdown import card_markdown
from flipgate.config import Threshold
from flipgate.exitcodes import USAGE_ERROR
from flipgate.exports.model_card import BEGIN, END
from flipgate.exports.model_card import card_main as cli_card_main
from flipgate.items import DatasetSpec, load_items
from flipgate.order.measure import order_cells
from flipgate.regression import Arm, compare_cell
from flipgate.regression.card import ITEMS_SHOWN, regression_markdown
from flipgate.regression.cell import apply_thresholds

READOUTS = ("letter_logprob", "regex")
WEIGHTS = "b" * 64
COMMIT = "0123456789abcdef0123456789abcdef01234567"
IDENTITY = {
    "model_id": "scripted-v1",
    "weights_sha256": WEIGHTS,
    "run_id": "base-run",
    "git_commit": COMMIT,
    "date": "2024-05-01T12:00:00+00:00",
    "trials_store": "reports/baseline/trials.sqlite",
}
ITEMS = {it.item_id: it for it in load_items(DatasetSpec("arc_challenge"), 5)}
IDS = sorted(ITEMS)


def card_main(argv: list[str]) -> int:
    """``python -m flipgate card`` as flipgate.__main__ runs it: with the registered suites."""
    return cli_card_main(argv, registry.suites())


def stable_on(ids):
    """A model that answers the gold option's content on ``ids`` (never flips) and the first
    displayed label elsewhere (a pure position bias: flips under permutation)."""

    def rule(req):
        item = ITEMS[req.key[1]]
        if item.item_id not in ids:
            return req.labels[0]
        gold = item.options[item.gold].strip()
        return next(line[0] for line in req.messages[0][1].splitlines() if line[2:].strip() == gold)

    return rule


def gate(comparison):
    """The regression gate with the thresholds inline."""
    thresholds = [
        Threshold("delta_flip_rate", 0.0, "max", vs="baseline"),
        Threshold("delta_accuracy", -0.05, "min", rule="warn", vs="baseline"),
    ]
    measured = comparison.primary.deltas
    apply_thresholds(comparison, [t for t in thresholds if t.metric in measured])
    return comparison


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """The candidate (stable on the last two items) against its baseline (stable on the first
    three), on option_order with the baseline missing one item (a partial comparison) and on its
    same-ordering control; both comparisons stored in the candidate's trials store."""
    tmp = tmp_path_factory.mktemp("regression")
    cand = make_auditor(tmp / "cand", ScriptedBackend(rule=stable_on(IDS[3:])))
    base = make_auditor(tmp / "base", ScriptedBackend(rule=stable_on(IDS[:3])))
    arms = {}
    for name, auditor in (("scripted-v1", base), ("scripted", cand)):
        perm = order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
        same = order_cells(auditor).trials(
            "scripted", "arc_challenge", "same_ordering:option_order"
        )
        arms[name] = (perm, same)
    store = cand.store
    store.add_model(
        "scripted",
        {"backend": "scripted", "weights_sha256": "c" * 64, "source": None},
        {"readouts": list(READOUTS), "primary_readout": "regex"},
    )
    base_perm, base_same = arms["scripted-v1"]
    cand_perm, cand_same = arms["scripted"]
    partial = compare_cell(
        Arm("scripted-v1", base_perm[base_perm["item_id"] != IDS[4]], READOUTS),
        Arm("scripted", cand_perm, READOUTS),
        "option_order",
        "arc_challenge",
        "regex",
        n_boot=200,
        partial=True,
    )
    control = compare_cell(
        Arm("scripted-v1", base_same, READOUTS, perm=base_perm),
        Arm("scripted", cand_same, READOUTS, perm=cand_perm),
        "same_ordering:option_order",
        "arc_challenge",
        "regex",
        n_boot=200,
    )
    for c in (partial, control):
        c.baseline_identity = dict(IDENTITY)
        gate(c)
        store.add_verdicts("scripted", "arc_challenge", c.verdicts[0].facet, c.verdicts)
        store.add_comparison("scripted", "arc_challenge", c.cell, c.baseline, c.to_dict())
    return {"store": store, "partial": partial, "control": control, "tmp": tmp}


@pytest.fixture(scope="module")
def written(compared):
    out = compared["tmp"] / "grid_cards"
    return out, write_cards(
        compared["store"], out, "cand-run", n_boot=200, suites=registry.suites()
    ).paths


def test_comparison_planted_items_and_per_item_values(compared):
    block = compared["partial"].to_dict()["readouts"]["regex"]
    assert block["items"]["newly_flipping"] == IDS[:3] and block["items"]["fixed"] == [IDS[3]]
    assert (
        block["deltas"]["delta_flip_rate"]["n_items"] == 4 and compared["partial"].overlap.partial
    )
    per_item = block["per_item"]["delta_flip_rate"]
    assert per_item == {
        "items": IDS[:4],
        "baseline": [0.0, 0.0, 0.0, 1.0],
        "candidate": [1.0, 1.0, 1.0, 0.0],
    }
    assert set(compared["control"].to_dict()["readouts"]["regex"]["deltas"]) == {
        "delta_flip_rate",
        "delta_parse_rate",
        "delta_delta_order",
    }


def test_card_carries_a_valid_regression_section(written):
    out, paths = written
    card = json.loads((out / "scripted/arc_challenge.json").read_text())
    validate_card(card)
    section = card["regression"]
    assert [c["cell"] for c in section["comparisons"]] == [
        "option_order",
        "same_ordering:option_order",
    ]
    first = section["comparisons"][0]
    assert first["baseline_identity"] == IDENTITY and first["overlap"]["shared_pairs"] == 24
    assert "per_item" not in first["readouts"]["regex"]  # the store keeps them; the card does not
    assert (
        section["level"] == 0.95
        and "| scripted vs scripted-v1 | option_order | arc\\_challenge" not in section["markdown"]
        and "| scripted vs scripted-v1 | option_order | arc_challenge | delta_flip_rate"
        in section["markdown"]
    )
    # the regression verdicts are the card's threshold verdicts too
    assert {v["facet"] for v in card["thresholds"]} >= {"option_order vs scripted-v1"}
    index = yaml.safe_load((out / "scripted/model-index.yaml").read_text())
    assert not any(
        "delta" in m["type"] for r in index["model-index"][0]["results"] for m in r["metrics"]
    )


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r["comparisons"][0]["overlap"].pop("partial"),
        lambda r: r["comparisons"][0]["overlap"].update(extra=1),
        lambda r: r["comparisons"][0]["readouts"]["regex"]["deltas"].update(
            flip_rate={"estimate": 0, "ci": None}
        ),
        lambda r: r["comparisons"][0]["readouts"]["regex"]["deltas"]["delta_flip_rate"].update(
            ci=[0.1]
        ),
        lambda r: r.update(comparisons=[]),
        lambda r: r.pop("markdown"),
        lambda r: r.update(table="x"),
    ],
)
def test_schema_rejects_bad_regression_sections(written, mutate):
    import jsonschema

    out, _ = written
    card = json.loads((out / "scripted/arc_challenge.json").read_text())
    mutate(card["regression"])
    with pytest.raises(jsonschema.ValidationError):
        validate_card(card)


def test_card_markdown_regression_section(written):
    out, _ = written
    md = (out / "scripted/arc_challenge.md").read_text()
    assert md == card_markdown(
        json.loads((out / "scripted/arc_challenge.json").read_text()), registry.suites()
    )
    section = md.split("## Regression vs baseline", 1)[1].split("## Threshold verdicts")[0]
    assert (
        f"Baseline scripted-v1: model scripted-v1, weights sha256 {WEIGHTS[:12]}, run base-run, "
        f"git commit {COMMIT[:12]}, 2024-05-01T12:00:00+00:00." in section
    )
    assert "| candidate vs baseline | cell | dataset | metric |" in section
    assert (
        "| scripted vs scripted-v1 | same\\_ordering:option\\_order |" not in section
    )  # not over-escaped
    assert (
        "| scripted vs scripted-v1 | same_ordering:option_order | arc_challenge "
        "| delta_delta_order |" in section
    )
    assert (
        "option_order × arc_challenge vs scripted-v1: compared on 24 of 30 (item, ordering) pairs"
        in section
    )
    assert (
        f"- newly flipping (3): {', '.join(IDS[:3])}" in section
        and f"- fixed (1): {IDS[3]}" in section
    )
    assert section.count("compared on") == 1  # the control's comparison was complete


def test_item_lists_are_truncated():
    record = {
        "candidate": "c",
        "baseline": "b",
        "cell": "option_order",
        "dataset": "d",
        "primary_readout": "r",
        "baseline_identity": {},
        "verdicts": [],
        "overlap": dict.fromkeys(
            (
                "baseline_items",
                "candidate_items",
                "shared_items",
                "baseline_pairs",
                "candidate_pairs",
                "shared_pairs",
            ),
            50,
        )
        | {"partial": False},
        "readouts": {
            "r": {
                "readout": "r",
                "deltas": {},
                "arms": {},
                "mcnemar": {},
                "items": {"newly_flipping": [f"i{n:02d}" for n in range(50)]},
            }
        },
    }
    lines = regression_markdown([record])
    flipping = next(line for line in lines if line.startswith("- newly flipping"))
    assert flipping.startswith("- newly flipping (50): i00, i01") and flipping.endswith(
        f"i{ITEMS_SHOWN - 1:02d}, … and {50 - ITEMS_SHOWN} more"
    )


def test_regression_md_written(written):
    out, paths = written
    assert out / "scripted/regression.md" in paths
    text = (out / "scripted/regression.md").read_text()
    assert text.startswith("# Regression: scripted vs baseline")
    assert (
        text.count("| scripted vs scripted-v1 |") == 3 + 3
    )  # three delta metrics per compared cell


def test_no_regression_md_without_comparisons(tmp_path):
    auditor = make_auditor(tmp_path, ScriptedBackend())
    order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    paths = write_cards(
        auditor.store, tmp_path / "cards", "r1", n_boot=200, suites=registry.suites()
    ).paths
    assert {p.name for p in paths} == {
        "arc_challenge.json",
        "arc_challenge.md",
        "model-index.yaml",
    }
    assert "regression" not in json.loads(
        (tmp_path / "cards/scripted/arc_challenge.json").read_text()
    )


def test_report_regression_without_allure_is_a_noop(compared, monkeypatch):
    import flipgate.regression.allure as report

    monkeypatch.setattr("flipgate.report.allure_module", lambda: None)
    monkeypatch.setattr(
        report, "regression_plot", lambda record: pytest.fail("plotted without allure")
    )
    assert report.report_regression(compared["partial"]) is None


def test_report_regression_outside_an_allure_test(compared):
    from flipgate.regression.allure import report_regression

    report_regression(
        compared["control"]
    )  # allure importable but no test is being reported: no effect


def test_report_regression_labels_and_attachments(compared, monkeypatch):
    import flipgate.regression.allure as report

    calls = []

    class Fake:
        class attachment_type:
            JSON, PNG, TEXT = "json", "png", "text"

        class dynamic:
            def __getattr__(self, name):
                return lambda *a, **k: calls.append((name, a))

        dynamic = dynamic()

        @staticmethod
        def attach(body, name, attachment_type, extension=None):
            calls.append(("attach", (name, body)))

    monkeypatch.setattr("flipgate.report.allure_module", lambda: Fake)
    report.report_regression(compared["partial"], level=0.95)
    labels = {name: args[0] for name, args in calls if name in ("epic", "feature", "story")}
    assert labels == {
        "epic": "regression",
        "feature": "scripted vs scripted-v1",
        "story": "option_order × arc_challenge",
    }
    attached = {args[0]: args[1] for name, args in calls if name == "attach"}
    assert "| 95% bootstrap CI (shown) |" in attached["regression table"]
    assert json.loads(attached["comparison.json"])["overlap"]["partial"] is True
    assert attached["regression.png"].startswith(b"\x89PNG")


@pytest.mark.parametrize("which", ["partial", "control"])
def test_regression_plot_is_a_png(compared, which):
    from flipgate.regression.allure import regression_plot

    record = compared[which].to_dict()
    png = regression_plot(record)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    for block in record["readouts"].values():
        block.pop("per_item")
    assert regression_plot(record).startswith(b"\x89PNG")  # a stored record without per-item values


AUTHOR = """---
license: apache-2.0
language:
- en
tags:
- order-robustness
---

# Scripted model

Written by the model's author; flipgate must never touch this.
"""


def _load(path):
    from huggingface_hub import ModelCard

    return ModelCard.load(path)


def test_card_into_creates_a_model_card(written, tmp_path, capsys):
    out, _ = written
    readme = tmp_path / "README.md"
    assert (
        card_main(["--into", str(readme), "--grid-cards-dir", str(out)]) == 0
    )  # the only model: scripted
    assert "merged" in capsys.readouterr().out
    text = readme.read_text()
    assert text.count(BEGIN) == text.count(END) == 1 and "# scripted" in text
    card = _load(readme)
    assert card.data.model_name == "scripted"
    assert any(
        r.metric_type == "flip_rate" and r.dataset_name == "arc_challenge"
        for r in card.data.eval_results
    )
    assert "| arc_challenge | cand-run | 5 | option_order | regex | 6 |" in card.text
    assert (
        "### Regression vs baseline" in card.text and f"weights sha256 {WEIGHTS[:12]}" in card.text
    )
    assert (
        "| scripted vs scripted-v1 | option_order | arc_challenge | delta_flip_rate |" in card.text
    )


def test_card_into_keeps_author_text_and_metadata(written, tmp_path):
    out, _ = written
    readme = tmp_path / "README.md"
    readme.write_text(AUTHOR.replace("tags:", "model-index:\n- name: stale\n  results: []\ntags:"))
    args = ["--into", str(readme), "--model", "scripted", "--grid-cards-dir", str(out)]
    assert card_main(args) == 0
    first = readme.read_text()
    assert "Written by the model's author; flipgate must never touch this.\n\n" + BEGIN in first
    assert card_main(args) == 0
    assert readme.read_text() == first  # idempotent
    # the author edits around the section and inside it; a rerun restores only the section
    edited = (
        first.replace("# Scripted model", "# Scripted model v2").replace(END, "hand edit\n" + END)
        + "\nFooter.\n"
    )
    readme.write_text(edited)
    assert card_main(args) == 0
    again = readme.read_text()
    assert again.count(BEGIN) == again.count(END) == 1 and "hand edit" not in again
    assert "# Scripted model v2" in again and again.endswith(END + "\n\nFooter.\n")
    meta = yaml.safe_load(again.split("---\n")[1])
    assert (
        meta["license"] == "apache-2.0"
        and meta["language"] == ["en"]
        and meta["tags"] == ["order-robustness"]
    )
    # the author's keys keep their order; huggingface_hub writes
    # model-index (from eval_results) last
    assert list(meta) == ["license", "language", "tags", "model-index"]
    assert [m["name"] for m in meta["model-index"]] == ["scripted"]  # replaced, not the stale one
    data = _load(readme).data
    assert data.license == "apache-2.0" and data.model_name == "scripted" and data.eval_results


def test_card_into_readme_without_metadata(written, tmp_path):
    out, _ = written
    readme = tmp_path / "README.md"
    readme.write_text("# Plain\n\nNo front matter here.\n")
    assert card_main(["--into", str(readme), "--grid-cards-dir", str(out)]) == 0
    text = readme.read_text()
    assert (
        text.startswith("---\nmodel-index:")
        and "# Plain\n\nNo front matter here.\n\n" + BEGIN in text
    )
    assert _load(readme).data.eval_results


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("flipgate: "), err
    return err


def test_card_into_errors(written, tmp_path, capsys):
    out, _ = written
    readme = tmp_path / "README.md"
    assert (
        card_main(["--into", str(readme), "--grid-cards-dir", str(tmp_path / "nowhere")])
        == USAGE_ERROR
    )
    assert str(tmp_path / "nowhere") in _error(capsys)
    assert (
        card_main(["--into", str(readme), "--grid-cards-dir", str(out), "--model", "other"])
        == USAGE_ERROR
    )
    assert str(out / "other") in _error(capsys)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert card_main(["--into", str(readme), "--grid-cards-dir", str(empty)]) == USAGE_ERROR
    assert "holds no model" in _error(capsys)
    readme.write_bytes(b"\xff\xfe\x00binary")
    assert card_main(["--into", str(readme), "--grid-cards-dir", str(out)]) == USAGE_ERROR
    assert str(readme) in _error(capsys) and readme.read_bytes() == b"\xff\xfe\x00binary"
    readme.write_text("---\n- not\n- a mapping\n---\nbody\n")
    assert card_main(["--into", str(readme), "--grid-cards-dir", str(out)]) == USAGE_ERROR
    assert str(readme) in _error(capsys)
    readme.write_text(f"text\n{BEGIN}\nno end marker\n")
    assert card_main(["--into", str(readme), "--grid-cards-dir", str(out)]) == USAGE_ERROR
    assert (
        "nothing was written" in _error(capsys)
        and readme.read_text() == f"text\n{BEGIN}\nno end marker\n"
    )
    assert (
        card_main(["--into", str(tmp_path / "missing/README.md"), "--grid-cards-dir", str(out)])
        == USAGE_ERROR
    )
    assert str(tmp_path / "missing") in _error(capsys)
    assert card_main(["--grid-cards-dir", str(out)]) == USAGE_ERROR
    assert "--into" in _error(capsys)


def test_card_needs_model_when_several(written, tmp_path, capsys):
    import shutil

    out, _ = written
    several = tmp_path / "grid_cards"
    shutil.copytree(out, several)
    shutil.copytree(out / "scripted", several / "acme/other")
    assert (
        card_main(["--into", str(tmp_path / "README.md"), "--grid-cards-dir", str(several)])
        == USAGE_ERROR
    )
    assert (
        "holds 2 models (acme/other, scripted); a model card is one model's: pick one with --model"
        in _error(capsys)
    )


@pytest.mark.slow
def test_python_m_flipgate_card(written, tmp_path):
    import subprocess
    import sys

    out, _ = written
    readme = tmp_path / "README.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "flipgate",
            "card",
            "--into",
            str(readme),
            "--grid-cards-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert readme.read_text().count(BEGIN) == 1
    # the command hands the registered suites to the cards: the regression suite's table
    assert "### Regression vs baseline" in readme.read_text()
