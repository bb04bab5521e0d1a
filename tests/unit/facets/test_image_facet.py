"""image_set_order: position-reference screen, drawn image sets, VLM path on a tiny random LLaVA."""

import io

import pandas as pd
import pytest
from PIL import Image

from flipgate.backends.hf import HFBackend
from flipgate.facets import get_facet
from flipgate.facets.image_set import position_reference
from flipgate.grammar import orderings
from flipgate.items import DatasetSpec, Item, load_items
from flipgate.items.hub import load_mantis_eval, load_medframeqa
from flipgate.items.shapes import draw
from flipgate.order.measure import order_cells
from flipgate.summary import facet_summary

FACET = get_facet("image_set_order")


@pytest.mark.parametrize(
    "text,hit",
    [
        ("What colour is the shape in the first image?", "first image"),
        ("Compare Image 2 and Image 3", "Image 2"),
        ("Which animal is on the left?", "on the left"),
        ("In the last picture, what is shown?", "last picture"),
        ("Is the 2nd frame brighter?", "2nd frame"),
        ("How many images show a dog?", None),
        ("What colour is the triangle?", None),
        ("Right or wrong: the cat is black", None),
    ],
)
def test_position_reference_screen(text, hit):
    assert position_reference(text) == hit


def _png(colour):
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


ITEM = Item(
    "s/1",
    "s",
    "How many images show a red shape?",
    ("0", "1", "2", "3"),
    1,
    images=(_png("red"), _png("blue"), _png("green")),
)


def test_render_permutes_images_not_options():
    for perm in orderings("s/1", 3, 6):
        req = FACET.render(ITEM, perm)
        assert req.images == tuple(ITEM.images[src] for src in perm)
        assert (
            req.messages[0][1].count("<image>") == 3
            and "A. 0\nB. 1\nC. 2\nD. 3" in req.messages[0][1]
        )
        assert FACET.map_back("B", ITEM, perm) == 1 and FACET.is_correct(1, ITEM)


def test_shapes_are_drawn_deterministically_and_screen_counts():
    items = load_items(DatasetSpec("synthetic_shapes"), None)
    assert draw("circle", "red") == draw("circle", "red") != draw("square", "red")
    screened = [it for it in items if FACET.screen(it)]
    assert 0 < len(screened) < len(items) / 4
    kept = [it for it in items if FACET.keep(it)]
    assert all(2 <= len(it.images) <= 5 and it.n_options == 4 for it in kept)


def test_tiny_llava_backend_sees_image_order(tiny_llava_dir, tmp_path):
    backend = HFBackend(
        {
            "id": "llava",
            "backend": "hf",
            "source": {"path": str(tiny_llava_dir)},
            "max_new_tokens": 2,
            "batch_size": 3,
            "_cache_dir": str(tmp_path),
        }
    )
    assert backend.supports_images and backend.fingerprint["vision"]
    requests = [FACET.render(ITEM, p) for p in orderings("s/1", 3, 6)]
    outs = backend.complete(requests)
    assert all(set(o.label_logprobs) == {"A", "B", "C", "D"} for o in outs)
    assert outs[0].label_logprobs != outs[1].label_logprobs  # the model saw a different image order
    single = HFBackend(
        {
            "id": "llava",
            "backend": "hf",
            "source": {"path": str(tiny_llava_dir)},
            "max_new_tokens": 2,
            "batch_size": 1,
            "_cache_dir": str(tmp_path),
        }
    )
    for a, b in zip(outs, single.complete(requests)):
        assert a.label_logprobs["A"] == pytest.approx(b.label_logprobs["A"], abs=1e-4)


def test_image_cell_through_the_runner_records_screen(tiny_llava_dir, tmp_path):
    from support.tiny_models import llava_auditor

    auditor = llava_auditor(tiny_llava_dir, tmp_path, "image_set_order", "synthetic_shapes", 4)
    df = order_cells(auditor).trials("llava", "synthetic_shapes", "image_set_order")
    s, _ = facet_summary(df, "letter_logprob", n_boot=200)
    assert s.n_items == 4 and s.k == 6 and s.metrics["parse_rate"].estimate == 1.0
    screen = auditor.store.screens("synthetic_shapes")["image_set_order"]
    assert screen["kept"] == 4 and screen["considered"] == 4 + screen["excluded"]


def test_text_only_model_skips_image_facet(tmp_path):
    from _pytest.outcomes import Skipped
    from support.auditors import make_auditor
    from support.scripted import ScriptedBackend

    from flipgate.order.cell import OrderCell

    auditor = make_auditor(tmp_path, ScriptedBackend())
    (tmp_path / "thr").mkdir()
    (tmp_path / "thr" / "default.yaml").write_text("thresholds: []\n")
    cell = OrderCell(
        auditor, str(tmp_path / "thr"), "image_set_order", "scripted", "synthetic_shapes"
    )
    with pytest.raises(
        Skipped, match="takes no images: image_set_order on synthetic_shapes not measured"
    ):
        cell.run()


def _image_cell(colour):
    return {"bytes": _png(colour), "path": None}


def test_mantis_eval_loader(tmp_path):
    rows = [
        {
            "id": "m1",
            "question_type": "multi-choice",
            "question": "<image><image> Which is red?",
            "images": [_image_cell("red"), _image_cell("blue")],
            "options": ["(A) apple", "(B) sky"],
            "answer": "A",
            "data_source": "x",
            "category": "c",
        },
        {
            "id": "m2",
            "question_type": "short-answer",
            "question": "?",
            "images": [_image_cell("red")],
            "options": [],
            "answer": "red",
            "data_source": "x",
            "category": "c",
        },
    ]
    path = tmp_path / "test.parquet"
    pd.DataFrame(rows).to_parquet(path)
    items = load_mantis_eval("mantis_eval", data_files=str(path))
    assert len(items) == 1 and items[0].options == ("apple", "sky") and items[0].gold == 0
    assert Image.open(io.BytesIO(items[0].images[1])).getpixel((0, 0)) == (0, 0, 255)


def test_medframeqa_loader_gold_by_text_and_bad_answer(tmp_path):
    rows = [
        {
            "question_id": "q1",
            "question": "Which finding?",
            "options": ["A. x", "B. y", "C. z"],
            "image": [_image_cell("red")] * 3,
            "answer": "C",
        },
        {
            "question_id": "q2",
            "question": "?",
            "options": ["A. x", "B. y"],
            "image": [_image_cell("red")] * 2,
            "answer": "y",
        },
    ]
    path = tmp_path / "test.parquet"
    pd.DataFrame(rows).to_parquet(path)
    items = load_medframeqa("medframeqa", data_files=str(path))
    assert [it.gold for it in items] == [2, 1] and items[0].options == ("x", "y", "z")
    rows[1]["answer"] = "w"
    pd.DataFrame(rows).to_parquet(path)
    from flipgate import FlipgateError

    with pytest.raises(FlipgateError, match="row 1: field 'answer' value 'w'"):
        load_medframeqa("medframeqa", data_files=str(path))


def test_mathvision_loader_keeps_option_rows_with_their_figure(tmp_path):
    rows = [
        {
            "id": "1",
            "question": "<image1>\nWhich shape is larger?",
            "options": ["A", "B", "C", "D", "E"],
            "image": "images/1.jpg",
            "decoded_image": _image_cell("red"),
            "answer": "C",
            "solution": None,
            "level": 2,
            "subject": "metric geometry",
        },
        {
            "id": "2",
            "question": "How many?",
            "options": [],
            "image": "images/2.jpg",
            "decoded_image": _image_cell("blue"),
            "answer": "7",
            "solution": None,
            "level": 1,
            "subject": "counting",
        },
    ]
    path = tmp_path / "test.parquet"
    pd.DataFrame(rows).to_parquet(path)
    from flipgate.items.hub import load_mathvision

    (item,) = load_mathvision("mathvision", data_files=str(path))
    assert item.question == "Which shape is larger?" and item.gold == 2 and len(item.images) == 1
    req = get_facet("option_order").render(item, (4, 3, 2, 1, 0))
    assert req.images == item.images and req.messages[0][1].startswith("<image>\n")


def test_medxpertqa_loader(tmp_path):
    import json

    rows = [
        {
            "id": "Text-0",
            "question": "A 45-year-old man... Which is next?\nAnswer Choices: (A) x (B) y (C) z",
            "options": {"A": "x", "B": "y", "C": "z"},
            "label": "B",
            "medical_task": "Treatment",
            "body_system": "Cardiovascular",
            "question_type": "Reasoning",
        }
    ]
    path = tmp_path / "test.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    from flipgate.items.hub import load_medxpertqa

    (item,) = load_medxpertqa("medxpertqa", data_files=str(path))
    assert item.question == "A 45-year-old man... Which is next?" and item.options == (
        "x",
        "y",
        "z",
    )
    assert item.gold == 1 and not item.images
