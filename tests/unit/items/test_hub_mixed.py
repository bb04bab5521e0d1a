"""Offline tests of the mixed-modality hub loaders on small files in the upstream schemas."""

import gzip
import io
import json
import zipfile

import pytest

from flipgate import FlipgateError
from flipgate.facets import get_facet
from flipgate.items.hub_mixed import load_mmdocrag, load_mramg_recipe, load_multimodalqa
from flipgate.items.shapes import draw


def _jpeg(colour: str = "red") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="JPEG")
    return buf.getvalue()


def _gif() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "blue").save(buf, format="GIF")
    return buf.getvalue()


def _jsonl(path, records, gz=False):
    text = "".join(json.dumps(r) + "\n" for r in records)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _store(root, files: dict, as_zip: str | None):
    """Write {relative name: bytes} as a folder under ``root`` or as ``root/as_zip``."""
    if as_zip:
        with zipfile.ZipFile(root / as_zip, "w") as z:
            for name, data in files.items():
                z.writestr(name, data)
        return
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


# --- MRAMG-Bench (recipe) ----------------------------------------------------------------------

MRAMG_IMAGES = {"r1_0": _jpeg("red"), "r1_1": draw("circle", "green"), "r2_0": _jpeg("blue")}


def _mramg(tmp_path, as_zip="IMAGE.zip", rows=None):
    _jsonl(
        tmp_path / "recipe_mqa.jsonl",
        rows
        or [
            {
                "id": "recipe_0",
                "question": "How do I make the bread?",
                "ground_truth": "Mix the flour, then bake.<PIC>",
                "images_list": ["r1_1"],
                "provenance": [1001],
            },
            {
                "id": "recipe_1",
                "question": "What goes on top?",
                "ground_truth": "Icing.",
                "images_list": ["r2_0"],
                "provenance": [1002],
            },
            {
                "id": "recipe_2",
                "question": "What is missing?",
                "ground_truth": "A picture.",
                "images_list": [],
                "provenance": [1003],
            },
        ],
    )
    # upstream doc lines are JSON arrays [id, content, images_list]; the k-th
    # <PIC> is images_list[k]
    _jsonl(
        tmp_path / "doc_recipe.jsonl",
        [
            [1001, "Mix the flour. <PIC> Knead and bake. <PIC>", ["r1_0", "r1_1"]],
            [1002, "<PIC> Add icing on top.", ["r2_0"]],
            [1003, "A step. <PIC>", ["r3_0"]],  # r3_0 is not in IMAGE.zip: the item is skipped
        ],
    )
    info = {
        name: {"image_path": f"{name}.jpg", "image_caption": f"caption of {name}"}
        for name in MRAMG_IMAGES
    }
    files = {f"IMAGE/images/RECIPE/{name}.jpg": data for name, data in MRAMG_IMAGES.items()}
    files["IMAGE/images_info/recipe_imgs_collection.json"] = json.dumps(info).encode()
    _store(tmp_path, files, as_zip)


@pytest.mark.parametrize("as_zip", ["IMAGE.zip", None])
def test_mramg_recipe_maps_docs_to_interleaved_components(tmp_path, as_zip):
    _mramg(tmp_path, as_zip)
    with pytest.warns(UserWarning, match=r"mramg_recipe: skipped 1 of 3 items .*recipe_2"):
        items = load_mramg_recipe("mramg_recipe", data_dir=tmp_path)
    assert [it.item_id for it in items] == ["mramg_recipe/recipe_0", "mramg_recipe/recipe_1"]
    bread, icing = items
    assert (
        bread.question == "How do I make the bread?"
        and bread.answer == "Mix the flour, then bake.<PIC>"
    )
    assert bread.meta["components"] == (("text", 0), ("image", 0), ("text", 1), ("image", 1))
    assert [p.text for p in bread.passages] == ["Mix the flour.", "Knead and bake."]
    assert bread.images == (MRAMG_IMAGES["r1_0"], MRAMG_IMAGES["r1_1"])
    assert bread.meta["gold_images"] == ("r1_1",) and bread.meta["provenance"] == (1001,)
    assert bread.meta["image_captions"] == ("caption of r1_0", "caption of r1_1")
    assert icing.meta["components"] == (("image", 0), ("text", 0)) and icing.images == (
        MRAMG_IMAGES["r2_0"],
    )


def test_mramg_row_missing_answer_names_file_row_field(tmp_path):
    _mramg(
        tmp_path,
        rows=[
            {"id": "a", "question": "Q?", "ground_truth": "A", "provenance": [1001]},
            {"id": "b", "question": "Q?", "ground_truth": "  ", "provenance": [1001]},
        ],
    )
    with pytest.raises(
        FlipgateError, match=r"recipe_mqa.jsonl \[test\] row 1: required field 'ground_truth'"
    ):
        load_mramg_recipe("mramg_recipe", data_dir=tmp_path)


def test_mramg_unknown_provenance_is_named(tmp_path):
    _mramg(tmp_path, rows=[{"id": "a", "question": "Q?", "ground_truth": "A", "provenance": [77]}])
    with pytest.raises(
        FlipgateError, match=r"row 0: field 'provenance' value 77 is not a document in .*doc_recipe"
    ):
        load_mramg_recipe("mramg_recipe", data_dir=tmp_path)


# --- MMDocRAG ----------------------------------------------------------------------------------


def _quote_text(k, text):
    return {"quote_id": f"text{k}", "type": "text", "text": text, "page_id": k, "layout_id": 10 + k}


def _quote_img(k, name):
    return {
        "quote_id": f"image{k}",
        "type": "image",
        "img_path": f"images/{name}.jpg",
        "img_description": f"a chart {k}",
        "page_id": k,
        "layout_id": 20 + k,
    }


def _mmdocrag(tmp_path, as_zip="images.zip", rows=None):
    _jsonl(
        tmp_path / "dev_15.jsonl",
        rows
        or [
            {
                "q_id": 0,
                "doc_name": "report",
                "domain": "Financial report",
                "question": "What was revenue in 2020?",
                "evidence_modality_type": ["Table", "Text"],
                "question_type": "Single-hop",
                "text_quotes": [_quote_text(1, "Revenue rose."), _quote_text(2, "Costs fell.")],
                "img_quotes": [_quote_img(1, "d1_p3_1"), _quote_img(2, "d1_p4_2")],
                "gold_quotes": ["image2", "text1"],
                "answer_short": "$5M",
                "answer_interleaved": "Revenue was $5M ![chart](image2).",
            },
            {
                "q_id": 1,
                "doc_name": "report",
                "domain": "Financial report",
                "question": "Which years?",
                "evidence_modality_type": ["Chart"],
                "question_type": "Multi-hop",
                "text_quotes": [_quote_text(1, "Years.")],
                "img_quotes": [_quote_img(1, "d1_p9_gif")],
                "gold_quotes": ["image1"],
                "answer_short": "['2019', '2020']",
                "answer_interleaved": "2019 and 2020.",
            },
        ],
    )
    _store(
        tmp_path,
        {
            "images/d1_p3_1.jpg": _jpeg(),
            "images/d1_p4_2.jpg": _jpeg("green"),
            "images/d1_p9_gif.jpg": _gif(),
        },
        as_zip,
    )


@pytest.mark.parametrize("as_zip", ["images.zip", None])
def test_mmdocrag_text_quotes_then_image_quotes(tmp_path, as_zip):
    _mmdocrag(tmp_path, as_zip)
    first, second = load_mmdocrag("mmdocrag", data_dir=tmp_path)
    assert (
        first.item_id == "mmdocrag/0"
        and first.question == "What was revenue in 2020?"
        and first.answer == "$5M"
    )
    assert first.meta["components"] == (("text", 0), ("text", 1), ("image", 0), ("image", 1))
    assert [(p.text, p.supporting) for p in first.passages] == [
        ("Revenue rose.", True),
        ("Costs fell.", False),
    ]
    assert first.images == (_jpeg(), _jpeg("green"))
    assert first.meta["quote_ids"] == ("text1", "text2", "image1", "image2")
    assert (
        first.meta["gold_quotes"] == ("image2", "text1")
        and first.meta["image_descriptions"][0] == "a chart 1"
    )
    assert first.meta["answer_interleaved"].startswith("Revenue was $5M")
    assert second.answer == "2019, 2020"  # a stringified list answer
    assert second.images[0].startswith(b"\x89PNG")  # a GIF is re-encoded as PNG


def test_mmdocrag_missing_field_and_unloadable_image(tmp_path):
    _mmdocrag(
        tmp_path,
        rows=[
            {
                "q_id": 5,
                "question": "Q?",
                "text_quotes": [_quote_text(1, "t")],
                "img_quotes": [_quote_img(1, "absent")],
                "answer_short": "x",
            },
            {
                "q_id": 6,
                "question": "Q?",
                "text_quotes": [_quote_text(1, "t")],
                "img_quotes": [_quote_img(1, "d1_p3_1")],
                "answer_short": "x",
            },
        ],
    )
    (tmp_path / "images.zip").unlink()
    _store(tmp_path, {"images/d1_p3_1.jpg": b"not an image"}, "images.zip")
    with pytest.warns(UserWarning, match=r"skipped 2 of 2 items"):
        assert load_mmdocrag("mmdocrag", data_dir=tmp_path) == []
    _mmdocrag(
        tmp_path,
        rows=[
            {
                "q_id": 7,
                "question": "Q?",
                "text_quotes": [],
                "img_quotes": [],
                "answer_short": "",
                "answer_interleaved": None,
            }
        ],
    )
    with pytest.raises(
        FlipgateError, match=r"dev_15.jsonl \[dev\] row 0: required field 'answer_short'"
    ):
        load_mmdocrag("mmdocrag", data_dir=tmp_path)
    _mmdocrag(tmp_path, rows=[{"q_id": 8, "question": "Q?", "img_quotes": [], "answer_short": "x"}])
    with pytest.raises(FlipgateError, match=r"row 0: required field 'text_quotes'"):
        load_mmdocrag("mmdocrag", data_dir=tmp_path)


# --- MultiModalQA ------------------------------------------------------------------------------


def _cell(text):
    return {"text": text, "links": []}


def _mmqa(tmp_path, rows=None, as_zip=None):
    _jsonl(
        tmp_path / "MMQA_dev.jsonl.gz",
        rows
        or [
            {
                "qid": "q1",
                "question": "Which player wears glasses?",
                "answers": [
                    {
                        "answer": "Ann Lee",
                        "type": "string",
                        "modality": "image",
                        "text_instances": [],
                        "table_indices": [],
                        "image_instances": [{"doc_id": "i2", "doc_part": "image"}],
                    },
                    {
                        "answer": "Bo Park",
                        "type": "string",
                        "modality": "image",
                        "text_instances": [],
                        "table_indices": [],
                        "image_instances": [],
                    },
                ],
                "metadata": {
                    "type": "Compose(TableQ,ImageListQ)",
                    "modalities": ["image", "table"],
                    "text_doc_ids": ["t1", "t2"],
                    "image_doc_ids": ["i1", "i2"],
                    "table_id": "tb1",
                    "intermediate_answers": [],
                    "wiki_entities_in_question": [],
                },
                "supporting_context": [
                    {"doc_id": "tb1", "doc_part": "table"},
                    {"doc_id": "i2", "doc_part": "image"},
                ],
            },
            {
                "qid": "q2",
                "question": "What year?",
                "answers": [{"answer": 1998, "type": "string", "modality": "text"}],
                "metadata": {
                    "type": "TextQ",
                    "modalities": ["text"],
                    "text_doc_ids": ["t1"],
                    "image_doc_ids": ["i3"],
                    "table_id": "tb1",
                },
                "supporting_context": [{"doc_id": "t1", "doc_part": "text"}],
            },
        ],
        gz=True,
    )
    _jsonl(
        tmp_path / "MMQA_texts.jsonl.gz",
        [
            {
                "title": "Team A",
                "url": "https://en.wikipedia.org/wiki/Team_A",
                "id": "t1",
                "text": "Team A was founded in 1998.",
            },
            {
                "title": "Team B",
                "url": "https://en.wikipedia.org/wiki/Team_B",
                "id": "t2",
                "text": "Team B plays in red.",
            },
            {"title": "Other", "url": "", "id": "t9", "text": "Unused."},
        ],
        gz=True,
    )
    _jsonl(
        tmp_path / "MMQA_tables.jsonl.gz",
        [
            {
                "title": "Team A",
                "url": "https://en.wikipedia.org/wiki/Team_A",
                "id": "tb1",
                "table": {
                    "table_name": "Roster",
                    "header": [
                        {"column_name": "Name", "metadata": {}},
                        {"column_name": "Year", "metadata": {}},
                    ],
                    "table_rows": [
                        [_cell("Ann Lee"), _cell("2001")],
                        [_cell("Bo Park"), _cell("2003")],
                    ],
                },
            }
        ],
        gz=True,
    )
    _jsonl(
        tmp_path / "MMQA_images.jsonl.gz",
        [
            {"title": "Ann Lee", "url": "", "id": "i1", "path": "Ann_Lee.jpg"},
            {"title": "Bo Park", "url": "", "id": "i2", "path": "Bo_Park.png"},
            {"title": "Gone", "url": "", "id": "i3", "path": "Gone.jpg"},
        ],
        gz=True,
    )
    _store(
        tmp_path,
        {
            "final_dataset_images/Ann_Lee.jpg": _jpeg(),
            "final_dataset_images/Bo_Park.png": draw("square", "red"),
        },
        as_zip,
    )


@pytest.mark.parametrize("as_zip", [None, "final_dataset_images.zip"])
def test_multimodalqa_joins_texts_table_images(tmp_path, as_zip):
    _mmqa(tmp_path, as_zip=as_zip)
    with pytest.warns(UserWarning, match=r"multimodalqa: skipped 1 of 2 items .*q2"):
        (item,) = load_multimodalqa("multimodalqa", data_dir=tmp_path)
    assert item.item_id == "multimodalqa/q1" and item.question == "Which player wears glasses?"
    assert item.answer == "Ann Lee" and item.aliases == ("Bo Park",)
    assert item.meta["components"] == (
        ("text", 0),
        ("text", 1),
        ("text", 2),
        ("image", 0),
        ("image", 1),
    )
    assert [(p.title, p.supporting) for p in item.passages] == [
        ("Team A", False),
        ("Team B", False),
        ("Team A - Roster", True),
    ]
    assert item.passages[0].text == "Team A was founded in 1998."
    assert item.passages[2].text == "Name | Year\nAnn Lee | 2001\nBo Park | 2003"
    assert item.images == (_jpeg(), draw("square", "red"))
    assert item.meta["type"] == "Compose(TableQ,ImageListQ)" and item.meta["image_titles"] == (
        "Ann Lee",
        "Bo Park",
    )
    assert item.meta["gold_doc_ids"] == ("i2", "tb1")


def test_multimodalqa_images_folder_passed_explicitly(tmp_path):
    _mmqa(tmp_path)
    with pytest.warns(UserWarning):
        items = load_multimodalqa(
            "multimodalqa", data_dir=tmp_path, images=tmp_path / "final_dataset_images"
        )
    assert len(items) == 1 and len(items[0].images) == 2


def test_multimodalqa_plain_string_answers_as_in_the_readme_example(tmp_path):
    _mmqa(
        tmp_path,
        rows=[
            {
                "qid": "q9",
                "question": "Q?",
                "answers": ["Team A", "team a", "Team A"],
                "metadata": {"text_doc_ids": ["t2", "t1"], "image_doc_ids": ["i1"]},
            }
        ],
    )
    (item,) = load_multimodalqa("multimodalqa", data_dir=tmp_path)
    assert item.answer == "Team A" and item.aliases == ("team a",)
    assert item.meta["components"] == (("text", 0), ("text", 1), ("image", 0))
    assert [p.title for p in item.passages] == ["Team B", "Team A"]


def test_multimodalqa_missing_answers_and_unknown_doc(tmp_path):
    _mmqa(tmp_path, rows=[{"qid": "q1", "question": "Q?", "metadata": {"text_doc_ids": ["t1"]}}])
    with pytest.raises(
        FlipgateError, match=r"MMQA_dev.jsonl.gz \[dev\] row 0: required field 'answers'"
    ):
        load_multimodalqa("multimodalqa", data_dir=tmp_path)
    _mmqa(
        tmp_path,
        rows=[{"qid": "q1", "question": "Q?", "answers": [{"type": "string"}], "metadata": {}}],
    )
    with pytest.raises(FlipgateError, match=r"row 0 answers\[0\]: required field 'answer'"):
        load_multimodalqa("multimodalqa", data_dir=tmp_path)
    _mmqa(
        tmp_path,
        rows=[
            {
                "qid": "q1",
                "question": "Q?",
                "answers": [{"answer": "x"}],
                "metadata": {"text_doc_ids": ["nope"]},
            }
        ],
    )
    with pytest.raises(
        FlipgateError, match=r"row 0: metadata value 'nope' is not an id in .*MMQA_texts"
    ):
        load_multimodalqa("multimodalqa", data_dir=tmp_path)


# --- sources: missing, unreadable, hub ---------------------------------------------------------


def test_missing_local_files_are_clear_errors(tmp_path):
    with pytest.raises(
        FlipgateError, match=r"MRAMG/MRAMG-Bench: file 'recipe_mqa.jsonl' not found in data_dir"
    ):
        load_mramg_recipe("mramg_recipe", data_dir=tmp_path)
    with pytest.raises(FlipgateError, match=r"'dev_15.jsonl' not found"):
        load_mmdocrag("mmdocrag", data_dir=tmp_path)
    with pytest.raises(FlipgateError, match=r"'MMQA_dev.jsonl.gz' or 'MMQA_dev.jsonl' not found"):
        load_multimodalqa("multimodalqa", data_dir=tmp_path)
    _mmdocrag(tmp_path)
    with pytest.raises(FlipgateError, match=r"images path .*nowhere does not exist"):
        load_mmdocrag("mmdocrag", data_dir=tmp_path, images=tmp_path / "nowhere")


def test_unreadable_files_are_clear_errors(tmp_path):
    _mmqa(tmp_path)
    (tmp_path / "MMQA_texts.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(FlipgateError, match=r"cannot read .*MMQA_texts.jsonl.gz"):
        load_multimodalqa("multimodalqa", data_dir=tmp_path)
    _mmdocrag(tmp_path)
    (tmp_path / "dev_15.jsonl").write_text("\n{broken\n")
    with pytest.raises(FlipgateError, match=r"dev_15.jsonl line 2: not valid JSON"):
        load_mmdocrag("mmdocrag", data_dir=tmp_path)
    _mramg(tmp_path)
    (tmp_path / "IMAGE.zip").write_bytes(b"not a zip")
    with pytest.raises(FlipgateError, match=r"cannot open image archive .*IMAGE.zip"):
        load_mramg_recipe("mramg_recipe", data_dir=tmp_path)
    (tmp_path / "doc_recipe.jsonl").write_text('{"id": 3}\n')
    with pytest.raises(
        FlipgateError, match=r"doc_recipe.jsonl row 0: expected \[id, content, images_list\]"
    ):
        load_mramg_recipe("mramg_recipe", data_dir=tmp_path)


def test_hub_path_downloads_the_upstream_files(tmp_path, monkeypatch):
    import huggingface_hub

    _mmdocrag(tmp_path)
    calls = []

    def fake_download(repo_id, filename, repo_type=None, revision=None):
        calls.append((repo_id, filename, repo_type, revision))
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    assert len(load_mmdocrag("mmdocrag", revision="abc")) == 2
    assert calls == [
        ("MMDocIR/MMDocRAG", "dev_15.jsonl", "dataset", "abc"),
        ("MMDocIR/MMDocRAG", "images.zip", "dataset", "abc"),
    ]
    calls.clear()
    _mramg(tmp_path)
    with pytest.warns(UserWarning):
        load_mramg_recipe("mramg_recipe")
    assert [c[1] for c in calls] == ["recipe_mqa.jsonl", "doc_recipe.jsonl", "IMAGE.zip"]
    calls.clear()
    _mmqa(tmp_path)
    with pytest.raises(
        FlipgateError, match=r"MultiModalQA images are not on the hub.*final_dataset_images.zip"
    ):
        load_multimodalqa("multimodalqa")
    with pytest.warns(UserWarning):
        assert len(load_multimodalqa("multimodalqa", images=tmp_path / "final_dataset_images")) == 1
    assert {c[0] for c in calls} == {"TableQAKit/MMQA"}


def test_hub_failure_is_a_clear_error(monkeypatch):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(
        FlipgateError,
        match=r"could not download 'recipe_mqa.jsonl' from hub dataset "
        r"'MRAMG/MRAMG-Bench' \(revision main\): no network",
    ):
        load_mramg_recipe("mramg_recipe")


def test_loaded_items_render_in_the_mixed_facet(tmp_path):
    _mmdocrag(tmp_path)
    facet = get_facet("mixed_modality_order")
    item = load_mmdocrag("mmdocrag", data_dir=tmp_path)[0]
    req = facet.render(item, (3, 0, 2, 1))
    assert req.images == (item.images[1], item.images[0])
    prompt = req.messages[0][1]
    assert (
        prompt.index("Revenue rose.") < prompt.index("Costs fell.") and prompt.count("<image>") == 2
    )
