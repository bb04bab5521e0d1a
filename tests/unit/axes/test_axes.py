"""Perturbation axes of the decomposition (docs/definitions.md §8): variants, rendering, map-back,
declared formats, and the paraphrase store and its gate."""

from __future__ import annotations

import pytest

from flipgate import FlipgateError
from flipgate.axes import get_axis
from flipgate.axes.formats import CANONICAL_FORMAT, FORMATS
from flipgate.axes.variant import LABEL_SETS
from flipgate.exitcodes import USAGE_ERROR
from flipgate.facets import get_facet
from flipgate.items import Item
from flipgate.paraphrases import Paraphrase, ParaphraseStore
from flipgate.readouts import parse_answer_label

ITEM = Item("d/1", "d", "Which is a fruit?", ("car", "apple", "rock", "chair"), 1)
PASS = {"meaning": "pass", "difficulty": "pass"}


def test_option_order_axis_is_the_cyclic_shifts():
    variants = get_axis("option_order").variants(ITEM)
    assert [v.perm for v in variants] == [(0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2)]
    # every option visits every slot once; a label maps back through the shift
    assert {v.perm[slot] for v in variants for slot in [0]} == {0, 1, 2, 3}
    assert variants[1].map_back("D", ITEM) == 0 and variants[3].map_back("B", ITEM) == 0


def test_label_set_axis_keeps_options_in_place():
    variants = get_axis("label_set").variants(ITEM)
    assert [v.shown_labels(ITEM) for v in variants] == [
        ("A", "B", "C", "D"),
        ("1", "2", "3", "4"),
        ("a", "b", "c", "d"),
        ("I", "II", "III", "IV"),
    ]
    roman = variants[3].render(ITEM)
    assert "II. apple" in roman.messages[0][1] and roman.labels == ("I", "II", "III", "IV")
    assert all(v.map_back(v.shown_labels(ITEM)[1], ITEM) == 1 for v in variants)
    assert all(len(labels) == 10 for labels in LABEL_SETS.values())


def test_canonical_variant_is_the_option_order_facets_prompt():
    """Condition 0 of every axis shows what the option_order facet shows at ordering 0."""
    facet = get_facet("option_order").render(ITEM, (0, 1, 2, 3))
    for name in ("option_order", "label_set", "prompt_format"):
        canonical = get_axis(name).variants(ITEM)[0].render(ITEM)
        assert canonical.messages == facet.messages and canonical.labels == facet.labels


def test_formats_differ_and_their_cues_parse():
    assert len(FORMATS) >= 4 and FORMATS[0] is CANONICAL_FORMAT
    assert len({f.sha256 for f in FORMATS}) == len(FORMATS)
    assert len({f.answer_cue for f in FORMATS}) >= 3 and len({f.joiner for f in FORMATS}) >= 2
    prompts = [v.render(ITEM).messages[0][1] for v in get_axis("prompt_format").variants(ITEM)]
    assert len(set(prompts)) == len(FORMATS)
    for f in FORMATS:
        assert parse_answer_label(f.answer_cue + " B", ("A", "B", "C", "D")) == "B"
        assert parse_answer_label(f.answer_cue + " **C**.", ("A", "B", "C", "D")) == "C"


def test_cloze_requests_carry_the_options_in_displayed_order():
    shifted = get_axis("option_order").variants(ITEM)[1].render(ITEM, cloze=True)
    assert shifted.continuations == ("apple", "rock", "chair", "car")
    assert get_axis("label_set").variants(ITEM)[0].render(ITEM).continuations == ()


def test_paraphrase_axis_uses_checked_rewrites_only():
    store = ParaphraseStore(
        [
            Paraphrase("d/1", "p1", "Name the fruit.", "human", PASS),
            Paraphrase(
                "d/1",
                "p2",
                "Which one is not a fruit?",
                "human",
                {"meaning": "fail", "difficulty": "pass"},
            ),
        ]
    )
    variants = get_axis("paraphrase", store).variants(ITEM)
    assert [(v.condition, v.paraphrase_id) for v in variants] == [(0, None), (1, "p1")]
    assert "Question: Name the fruit." in variants[1].render(ITEM).messages[0][1]
    report = store.gate(["d/1", "d/2"])
    assert report.passed and (report.usable, report.rejected, report.unchecked) == (1, 1, 0)
    assert (report.items_with_rewrites, report.items) == (1, 2)
    with pytest.raises(FlipgateError, match="needs a paraphrase store"):
        get_axis("paraphrase")
    with pytest.raises(FlipgateError, match="unknown axis 'label_sets'"):
        get_axis("label_sets")


def test_paraphrase_gate_fails_on_unchecked_or_missing_rewrites():
    unchecked = ParaphraseStore([Paraphrase("d/1", "g1", "Fruit?", "model:m")])
    report = unchecked.gate(["d/1"])
    assert not report.passed and "d/1#g1" in report.reason and "not checked" in report.reason
    empty = ParaphraseStore([]).gate(["d/1"])
    assert not empty.passed and "no item of the run has a checked rewrite" in empty.reason


@pytest.mark.parametrize(
    "line,needle",
    [
        ("{not json", "not a JSON object"),
        ('{"item_id": "d/1", "paraphrase_id": "p", "text": "", "generator": "h"}', "field 'text'"),
        (
            '{"item_id": "d/1", "paraphrase_id": "p", "text": "t", "generator": "h", '
            '"checks": {"meaning": "ok"}}',
            "field checks.meaning",
        ),
        (
            '{"item_id": "d/1", "paraphrase_id": "p", "text": "t", "generator": "h", "x": 1}',
            "unknown field(s) ['x']",
        ),
    ],
)
def test_bad_store_line_names_file_line_and_field(tmp_path, line, needle):
    (tmp_path / "s.jsonl").write_text(
        '{"item_id": "d/0", "paraphrase_id": "p", "text": "t", "generator": "h"}\n' + line + "\n"
    )
    with pytest.raises(FlipgateError) as err:
        ParaphraseStore.load(tmp_path)
    assert f"{tmp_path / 's.jsonl'} line 2" in str(err.value) and needle in str(err.value)


def test_shipped_store_is_checked_and_covers_the_default_items():
    """The offline default's rewrites: written and checked in this project, some rejected."""
    from support.paths import REPO

    from flipgate.config import load_models
    from flipgate.decomposition.run import decomposable
    from flipgate.items import load_items

    plan = load_models(REPO / "models.yaml").plans["decomposition"]
    store = ParaphraseStore.load(plan.paraphrases)
    for spec in plan.datasets:
        ids = [it.item_id for it in load_items(spec, 40, 42, keep=decomposable)]
        report = store.gate(ids)
        assert report.passed and report.items_with_rewrites == 40, report
    statuses = {p.status for rows in store.by_item.values() for p in rows}
    assert statuses == {"usable", "rejected"}  # not an all-passing placeholder


def test_generate_paraphrases_writes_unchecked_rewrites(tmp_path, monkeypatch):
    """The command fills the store through a backend; its rewrites are unchecked (the gate then
    stops a run), an empty or copied output is counted and skipped."""
    from support.paths import write
    from support.scripted import ScriptedBackend

    from flipgate.backends.base import Output
    from flipgate.decomposition import generate as gen

    class Rewriter(ScriptedBackend):
        def complete(self, requests):
            texts = [" In words: what is it?\nmore", "   ", " " + requests[-1].key[1]]
            return [Output(texts[i % 3]) for i in range(len(requests))]

    monkeypatch.setattr("flipgate.calls.create_backend", lambda cfg: Rewriter())
    models = write(
        tmp_path / "models.yaml",
        """
audit:
  decomposition: {datasets: [basic_arithmetic], paraphrases: store}
models:
  - {id: m, backend: hf, source: {path: nowhere}, suites: [decomposition]}
""",
    )
    out = tmp_path / "store" / "new.jsonl"
    assert (
        gen.generate_main(
            [
                "--models",
                str(models),
                "--model",
                "m",
                "--dataset",
                "basic_arithmetic",
                "--n",
                "3",
                "--out",
                str(out),
                "--cache-dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    store = ParaphraseStore.load(tmp_path / "store")
    rows = [p for ps in store.by_item.values() for p in ps]
    assert [p.text for p in rows][0] == "In words: what is it?"
    assert all(p.status == "unchecked" and p.generator.startswith("model:m@") for p in rows)
    assert len(rows) == 2  # the blank output gave none
    assert not store.gate(list(store.by_item)).passed
    assert (
        gen.generate_main(
            ["--models", str(models), "--model", "ghost", "--dataset", "basic_arithmetic"]
            + ["--cache-dir", str(tmp_path / "cache")]
        )
        == USAGE_ERROR
    )
