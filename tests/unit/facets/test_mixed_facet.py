"""mixed_modality_order: component rendering, judge prompt/verdicts, sem-flip vs text-flip."""

import pandas as pd
import pytest

from flipgate.facets import get_facet
from flipgate.grammar import orderings
from flipgate.items import DatasetSpec, load_items
from flipgate.judging import UNPARSABLE, is_sem_flip, sem_flip_request, verdict_from_label
from flipgate.order.measure import order_cells
from flipgate.summary import facet_summary

FACET = get_facet("mixed_modality_order")


def test_synthetic_mixed_items_render_components_in_permuted_order():
    items = load_items(DatasetSpec("synthetic_mixed"), 10, keep=FACET.keep)
    assert len(items) == 10
    item = next(it for it in items if len(it.images) == 2)
    n = FACET.n_units(item)
    for perm in orderings(item.item_id, n, 6):
        req = FACET.render(item, perm)
        kinds = [item.meta["components"][src] for src in perm]
        assert req.images == tuple(item.images[j] for kind, j in kinds if kind == "image")
        texts = [item.passages[j].text for kind, j in kinds if kind == "text"]
        positions = [req.messages[0][1].index(t) for t in texts]
        assert positions == sorted(positions) and req.messages[0][1].count("<image>") == len(
            item.images
        )
        assert req.labels == () and req.max_new_tokens == 32


def test_text_flip_is_exact_string_and_em_scores():
    item = load_items(DatasetSpec("synthetic_mixed"), 1, keep=FACET.keep)[0]
    assert FACET.map_back(" Paris ", item, ()) == "Paris" != FACET.map_back("paris", item, ())
    assert FACET.is_correct(f"The {item.answer}", item)


def test_judge_request_and_verdicts():
    item = load_items(DatasetSpec("synthetic_mixed"), 1, keep=FACET.keep)[0]
    req = sem_flip_request(item, ["x", None, "y"])
    prompt = req.messages[0][1]
    assert "1. x\n2. (no answer)\n3. y" in prompt and f"Reference answer: {item.answer}" in prompt
    assert req.labels == ("A", "B", "C")
    assert [verdict_from_label(x) for x in ("A", "B", "C", None)] == [
        "equivalent",
        "partial-flip",
        "full-flip",
        UNPARSABLE,
    ]
    assert is_sem_flip("equivalent") == 0.0 and is_sem_flip("full-flip") == 1.0
    assert is_sem_flip(UNPARSABLE) != is_sem_flip(UNPARSABLE)  # NaN: excluded like a parse failure


def test_sem_flip_rate_from_planted_judgements():
    rows = []
    for item, answers in {
        "a": ["Paris", "paris", "Paris."],
        "b": ["Rome", "Rome", "Rome"],
        "c": ["x", "y", "z"],
    }.items():
        for o, text in enumerate(answers):
            rows.append(
                {
                    "item_id": item,
                    "condition": o,
                    "mapped": {"regex": text},
                    "correct": {"regex": None},
                    "n_classes": 3,
                }
            )
    trials = pd.DataFrame(rows)
    s, items = facet_summary(
        trials,
        "regex",
        n_boot=200,
        judgements={"a": "equivalent", "b": "equivalent", "c": "full-flip"},
    )
    assert s.metrics["flip_rate"].estimate == pytest.approx(2 / 3)  # text-flip: a and c
    assert s.metrics["sem_flip_rate"].estimate == pytest.approx(1 / 3)  # the judge collapses a
    assert s.metrics["judge_parse_rate"].estimate == 1.0
    s, _ = facet_summary(
        trials, "regex", n_boot=200, judgements={"a": "equivalent", "c": "partial-flip"}
    )
    assert s.metrics["sem_flip_rate"].estimate == pytest.approx(1 / 2)
    assert s.metrics["judge_parse_rate"].estimate == pytest.approx(2 / 3)


@pytest.mark.slow
def test_mixed_cell_with_tiny_llava_and_judge(tiny_llava_dir, tmp_path):
    from support.tiny_models import llava_auditor

    auditor = llava_auditor(tiny_llava_dir, tmp_path, "mixed_modality_order", "synthetic_mixed", 3)
    trials = order_cells(auditor).trials("llava", "synthetic_mixed", "mixed_modality_order")
    assert len(trials) == 18 and auditor.readouts("llava", "mixed_modality_order") == (
        ["regex"],
        "regex",
    )
    verdicts = order_cells(auditor).judgements(
        "llava", "synthetic_mixed", "mixed_modality_order", trials
    )
    assert len(verdicts) == 3 and set(verdicts.values()) <= {
        "equivalent",
        "partial-flip",
        "full-flip",
    }
    assert auditor.store.judgements("llava", "synthetic_mixed", "mixed_modality_order") == verdicts
    calls = auditor.calls
    order_cells(auditor).judgements("llava", "synthetic_mixed", "mixed_modality_order", trials)
    assert auditor.calls == calls  # judge calls are cached too
