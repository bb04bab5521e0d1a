"""Dataset rows are validated before they become items (issue #28, "dataset rows silently
misread"): repeated item ids, null/empty/repeated options, an options string, a non-integer gold
index, a non-UTF-8 file, a folder for a file and an oversized row each end with one line naming
the file, the row and the field. End to end, the real suites run in-process on a local JSONL
declared in a tmp models.yaml (as tests/integration/test_bad_input.py does) and exit with the
usage status."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from support.bad_input import Case, models_with, run_in_process
from support.paths import REPO

from flipgate import FlipgateError
from flipgate.exitcodes import USAGE_ERROR
from flipgate.items.alignment import load_crows_pairs, load_xstest
from flipgate.items.hub import load_commonsense_qa_hub, load_medxpertqa, load_mmlu_pro, records
from flipgate.items.item import Item
from flipgate.items.judge_sets import load_judgebench, load_rewardbench2
from flipgate.items.validate import MAX_ITEM_CHARS, RowItems, check_item
from flipgate.judging.choice import load_agreement_set

OPTION_ORDER = str(REPO / "suites" / "order" / "test_option_order.py")
JUDGES = str(REPO / "suites" / "judges" / "test_judges.py")
READOUTS = str(REPO / "suites" / "decomposition" / "test_decomposition.py")


def _jsonl(path: Path, rows: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _mmlu_pro(n: int = 4) -> list[dict]:
    return [
        {
            "question_id": i,
            "question": f"Q{i}?",
            "options": ["a", "b", "c", "d"],
            "answer_index": 1,
            "category": "x",
        }
        for i in range(n)
    ]


def _judgebench(n: int = 4) -> list[dict]:
    return [
        {
            "pair_id": f"p{i}",
            "original_id": None,
            "source": "livebench-math",
            "question": f"Problem {i}?",
            "response_model": "gpt-4o",
            "response_A": f"A of {i}",
            "response_B": f"B of {i}",
            "label": "A>B",
        }
        for i in range(n)
    ]


def _csqa(n: int = 3) -> list[dict]:
    return [
        {
            "id": f"c{i}",
            "question": f"Where {i}?",
            "question_concept": "x",
            "choices": {"label": list("ABCDE"), "text": ["p", "q", "r", "s", "t"]},
            "answerKey": "C",
        }
        for i in range(n)
    ]


def _crows(n: int = 3) -> list[dict]:
    return [
        {
            "id": i,
            "sent_more": f"more {i}",
            "sent_less": f"less {i}",
            "stereo_antistereo": "stereo",
            "bias_type": "age",
        }
        for i in range(n)
    ]


def _agreement(n: int = 3) -> list[dict]:
    return [
        {
            "id": f"r{i}",
            "question": "q",
            "labels": ["A", "B"],
            "options": ["x", "y"],
            "reply": "Answer: A",
            "answer": "A",
        }
        for i in range(n)
    ]


def _edit(rows: list[dict], row: int, **fields) -> list[dict]:
    rows = [dict(r) for r in rows]
    rows[row].update(fields)
    return rows


def _refuses(load, rows: list, path: Path, *fragments: str, **kw) -> str:
    """``load`` on ``rows`` written as JSONL at ``path`` raises one line holding every fragment
    (and the file)."""
    data = _jsonl(path, rows)
    with pytest.raises(FlipgateError) as err:
        load(path.stem, data_files=data, **kw)
    message = str(err.value)
    assert "\n" not in message and str(path) in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


# ---------------------------------------------------------------------------------------------
# 1, 2: repeated item ids


@pytest.mark.parametrize(
    "load,rows,fragments",
    [
        (
            load_mmlu_pro,
            _edit(_mmlu_pro(), 2, question_id=0),
            ("row 2", "'question_id'", "'rows/0'", "row 0"),
        ),
        (load_commonsense_qa_hub, _edit(_csqa(), 1, id="c0"), ("row 1", "'id'", "/c0", "row 0")),
        (load_crows_pairs, _edit(_crows(), 2, id=1), ("row 2", "'id'", "/1'", "row 1")),
        (
            load_xstest,
            [{"id": 7, "prompt": f"p{i}", "label": "safe"} for i in range(2)],
            ("row 1",),
        ),
        # 2: JudgeBench: a repeated pair_id overwrote a set's trials
        (load_judgebench, _edit(_judgebench(), 3, pair_id="p1"), ("row 3", "'pair_id'", "/p1")),
        (
            load_rewardbench2,
            [
                {"id": 5, "prompt": f"q{i}", "chosen": ["c"], "rejected": ["r", "s"]}
                | {"subset": "Factuality"}
                for i in range(2)
            ],
            ("row 1", "'id'", "/5"),
        ),
    ],
    ids=["mmlu_pro", "commonsense_qa_hub", "crows_pairs", "xstest", "judgebench", "rewardbench2"],
)
def test_a_repeated_item_id_is_refused(tmp_path, load, rows, fragments):
    message = _refuses(load, rows, tmp_path / "rows.jsonl", *fragments)
    assert "unique" in message


def test_a_repeated_agreement_set_id_is_refused(tmp_path):
    path = Path(_jsonl(tmp_path / "agreement.jsonl", _edit(_agreement(), 2, id="r0")))
    with pytest.raises(
        FlipgateError, match=r"agreement.jsonl line 3: field 'id' .*'r0', as line 1"
    ):
        load_agreement_set(path)


def test_distinct_ids_from_other_sources_do_not_collide():
    items = RowItems("id")
    items.add(Item("d/1", "d", "q", ("a", "b"), 0), "f row 0", 0)
    items.add(Item("d/2", "d", "q", ("a", "b"), 0), "f row 1", 1)
    assert [it.item_id for it in items.items] == ["d/1", "d/2"]


# ---------------------------------------------------------------------------------------------
# 3: a null or empty option (it was dropped before the gold index applied: gold moved)


@pytest.mark.parametrize("bad", [None, "", "   ", 3, ["nested"]])
def test_a_null_empty_or_non_text_option_is_refused_not_dropped(tmp_path, bad):
    rows = _edit(_mmlu_pro(), 1, options=["a", bad, "c", "d"], answer_index=2)
    _refuses(load_mmlu_pro, rows, tmp_path / "rows.jsonl", "row 1", "'options' index 1")


def test_a_null_choice_text_is_refused(tmp_path):
    choices = {"label": list("ABCDE"), "text": ["p", None, "r", "s", "t"]}
    rows = _edit(_csqa(), 2, choices=choices)
    _refuses(load_commonsense_qa_hub, rows, tmp_path / "rows.jsonl", "row 2", "'choices.text'")


@pytest.mark.parametrize("field", ["response_A", "response_B"])
@pytest.mark.parametrize("bad", [" ", 12])
def test_a_blank_or_non_text_judgebench_response_is_refused(tmp_path, field, bad):
    rows = _edit(_judgebench(), 0, **{field: bad})
    _refuses(load_judgebench, rows, tmp_path / "rows.jsonl", "row 0", f"'{field}'")


def test_a_null_rewardbench2_response_is_refused(tmp_path):
    rows = [
        {"id": 1, "prompt": "q", "chosen": ["c"], "rejected": ["r", None], "subset": "Factuality"}
    ]
    _refuses(load_rewardbench2, rows, tmp_path / "rows.jsonl", "row 0", "'rejected' index 1")


def test_a_null_medxpertqa_option_before_a_present_one_is_refused(tmp_path):
    row = {"id": "m0", "question": "q", "options": {"A": "x", "B": None, "C": "z"}, "label": "C"}
    _refuses(load_medxpertqa, [row], tmp_path / "rows.jsonl", "row 0", "'options.B'")


def test_mmlu_pro_placeholders_are_dropped_with_the_gold_index_remapped(tmp_path):
    rows = _edit(_mmlu_pro(), 0, options=["N/A", "a", "b", "N/A", "c"], answer_index=2)
    (item, *_) = load_mmlu_pro("mmlu_pro", data_files=_jsonl(tmp_path / "rows.jsonl", rows))
    assert item.options == ("a", "b", "c") and item.options[item.gold] == "b"
    rows = _edit(_mmlu_pro(), 0, options=["a", "b", "N/A"], answer_index=2)
    _refuses(load_mmlu_pro, rows, tmp_path / "na.jsonl", "row 0", "'answer_index' value 2", "N/A")


# ---------------------------------------------------------------------------------------------
# 4: repeated option texts (a pick between identical options counted as a flip)


@pytest.mark.parametrize(
    "options,pair",
    [
        (["x", "x", "x", "x"], "indices 0 and 1"),
        (["a", "b", "c", "b"], "indices 1 and 3"),
        (["a", "b c", "c", " b  c "], "indices 1 and 3"),
    ],
)
def test_repeated_options_are_refused(tmp_path, options, pair):
    rows = _edit(_mmlu_pro(), 3, options=options)
    _refuses(load_mmlu_pro, rows, tmp_path / "rows.jsonl", "row 3", f"'options' {pair}")


def test_identical_judgebench_responses_are_refused(tmp_path):
    rows = _edit(_judgebench(), 1, response_B="A of 1")
    fields = "fields 'response_A' and 'response_B'"
    _refuses(load_judgebench, rows, tmp_path / "rows.jsonl", "row 1", fields)


def test_identical_crows_pairs_sentences_are_refused(tmp_path):
    rows = _edit(_crows(), 0, sent_less="more 0")
    _refuses(load_crows_pairs, rows, tmp_path / "rows.jsonl", "row 0", "'sent_more' and")


def test_repeated_agreement_set_options_or_labels_are_refused(tmp_path):
    for field, value in (("options", ["x", "x"]), ("labels", ["A", "A"])):
        path = Path(_jsonl(tmp_path / f"{field}.jsonl", _edit(_agreement(), 1, **{field: value})))
        with pytest.raises(FlipgateError, match=rf"line 2: field '{field}' indices 0 and 1"):
            load_agreement_set(path)


def test_a_rewardbench2_row_with_a_repeated_response_is_dropped_as_documented(tmp_path):
    rows = [
        {"id": i, "prompt": "q", "chosen": ["c"], "rejected": rejected, "subset": "Factuality"}
        for i, rejected in enumerate([["r", "s"], ["r", "r"], ["c", "s"]])
    ]
    items = load_rewardbench2("rb2", data_files=_jsonl(tmp_path / "rows.jsonl", rows))
    assert [it.meta["original_id"] for it in items] == ["0"]


# ---------------------------------------------------------------------------------------------
# 5: options given as one string (it was split into its characters)


@pytest.mark.parametrize("every_row", [True, False])
@pytest.mark.parametrize("value", ["ABCD", {"A": "a"}, 4])
def test_options_must_be_a_list(tmp_path, every_row, value):
    rows = [dict(r, options=value) if every_row or i == 2 else r for i, r in enumerate(_mmlu_pro())]
    row = "row 0" if every_row else "row 2"
    _refuses(load_mmlu_pro, rows, tmp_path / "rows.jsonl", row, "'options' must be a list")


def test_choice_texts_must_be_a_list(tmp_path):
    rows = _edit(_csqa(), 0, choices={"label": list("ABCDE"), "text": "pqrst"})
    _refuses(load_commonsense_qa_hub, rows, tmp_path / "rows.jsonl", "'choices.text' must be")


def test_rewardbench2_rejected_must_be_a_list(tmp_path):
    rows = [{"id": 1, "prompt": "q", "chosen": ["c"], "rejected": "rs", "subset": "Factuality"}]
    _refuses(load_rewardbench2, rows, tmp_path / "rows.jsonl", "'rejected' must be a list")


# ---------------------------------------------------------------------------------------------
# 6: the gold index must be an int, not a bool, in range


@pytest.mark.parametrize("every_row", [True, False])
@pytest.mark.parametrize("value", [True, False, 1.0, "1", -1, 4])
def test_answer_index_must_be_an_int_in_range(tmp_path, every_row, value):
    rows = [
        dict(r, answer_index=value) if every_row or i == 1 else r for i, r in enumerate(_mmlu_pro())
    ]
    row = "row 0" if every_row else "row 1"
    fragments = (row, "'answer_index'", repr(value), "integer from 0 to 3")
    _refuses(load_mmlu_pro, rows, tmp_path / "rows.jsonl", *fragments)


def test_check_item_refuses_a_bool_gold():
    with pytest.raises(FlipgateError, match="'answer' value True"):
        check_item(Item("d/1", "d", "q", ("a", "b"), True), "f row 0")


# ---------------------------------------------------------------------------------------------
# 7: a non-UTF-8 file: one line with the byte and its offset


def test_a_non_utf8_jsonl_names_the_file_and_the_byte_offset(tmp_path):
    path = tmp_path / "rows.jsonl"
    good = "".join(json.dumps(r) + "\n" for r in _mmlu_pro(2)).encode()
    path.write_bytes(good + b'{"question": "caf\xe9"}\n')
    with pytest.raises(FlipgateError) as err:
        load_mmlu_pro("mmlu_pro", data_files=str(path))
    offset = len(good) + len('{"question": "caf')
    assert str(err.value) == (
        f"{path}: not UTF-8 text: byte b'\\xe9' at offset {offset} (save the file as UTF-8)"
    )


def test_a_non_utf8_byte_past_the_first_block_gets_its_file_offset(tmp_path):
    path = tmp_path / "rows.json"
    data = bytearray(("\u00e9" * (1 << 19) + "xx").encode())  # 1 MiB of 2-byte characters
    data[(1 << 20) + 1] = 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(FlipgateError, match=rf"byte b'\\xff' at offset {(1 << 20) + 1} "):
        load_judgebench("judgebench", data_files=str(path))


@pytest.mark.parametrize("gz", [False, True])
def test_a_non_utf8_mixed_modality_file_names_the_byte_offset(tmp_path, gz):
    raw = b'{"id": 1}\n{"id": "\xff"}\n'
    path = tmp_path / ("docs.jsonl.gz" if gz else "docs.jsonl")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    with pytest.raises(FlipgateError, match=r"docs.jsonl(.gz)?: not UTF-8 text: .* offset 18 "):
        list(records(path))


def test_a_non_utf8_agreement_set_names_the_byte_offset(tmp_path):
    path = tmp_path / "agreement.jsonl"
    path.write_bytes(b'{"id": "r\x80"}\n')
    with pytest.raises(FlipgateError, match=r"agreement.jsonl: not UTF-8 text: .* offset 9 "):
        load_agreement_set(path)


# ---------------------------------------------------------------------------------------------
# 8: a folder where a file belongs


def test_a_data_files_folder_is_refused(tmp_path):
    folder = tmp_path / "rows.jsonl"
    folder.mkdir()
    _jsonl(folder / "inner.jsonl", _mmlu_pro())
    with pytest.raises(FlipgateError, match=r"rows.jsonl: field 'data_files' names a folder"):
        load_mmlu_pro("mmlu_pro", data_files=str(folder))
    with pytest.raises(FlipgateError, match=r"names a folder"):
        load_judgebench("judgebench", data_files=[str(folder)])


def test_an_agreement_set_folder_is_refused(tmp_path):
    with pytest.raises(FlipgateError, match=r"agreement_set' names a folder, not a data file"):
        load_agreement_set(tmp_path)


# ---------------------------------------------------------------------------------------------
# 9: an oversized row (one 100,000-character option ran > 400 s without output)


@pytest.mark.parametrize("field", ["question", "options"])
def test_an_item_over_the_text_limit_is_refused(tmp_path, field):
    long = "x" * 100_000
    value = long if field == "question" else ["a", long, "c", "d"]
    rows = _edit(_mmlu_pro(), 1, **{field: value})
    fragments = ("row 1", "100,00", f"limit of {MAX_ITEM_CHARS:,}")
    _refuses(load_mmlu_pro, rows, tmp_path / "rows.jsonl", *fragments)


def test_a_long_judgebench_response_is_refused(tmp_path):
    rows = _edit(_judgebench(), 2, response_A="y" * (MAX_ITEM_CHARS + 1))
    _refuses(load_judgebench, rows, tmp_path / "rows.jsonl", "row 2", "over the limit")


def test_an_item_at_the_text_limit_loads():
    options = ("a", "b")
    question = "q" * (MAX_ITEM_CHARS - 2)
    assert check_item(Item("d/1", "d", question, options, 0), "f row 0").question == question
    with pytest.raises(FlipgateError, match="20,001 characters"):
        check_item(Item("d/1", "d", question + "q", options, 0), "f row 0")


# ---------------------------------------------------------------------------------------------
# the shipped datasets still load; end to end through the real suites


def test_the_shipped_datasets_still_load():
    """Every dataset of the shipped models.yaml and plans load through the registry, and every
    benchmark of the default envelope. The bundled MMLU and CommonsenseQA keep their few upstream
    items with a repeated option (see RowItems)."""
    from flipgate.config import load_models
    from flipgate.envelope.spec import load_envelope
    from flipgate.items import DatasetSpec, load_items

    specs = []
    for plan in ("models.yaml", "plans/release-scale.yaml", "plans/smoke.yaml"):
        cfg = load_models(REPO / plan)
        specs += [
            *(s for specs in cfg.facets.values() for s in specs),
            *cfg.plans["decomposition"].datasets,
            *cfg.plans["judges"].datasets,
        ]
    envelope = load_envelope(REPO / "suites/envelope/envelopes/default.yaml", ["m"])
    for spec in [*specs, *envelope.benchmarks]:
        assert load_items(spec, 3), spec.name
    kept = {it.item_id: it for it in load_items(DatasetSpec("mmlu"), None)}
    assert kept["mmlu/business_ethics/2"].options[:2] == ("Employee rights", "Employee rights")


def _suite_line(tmp_path, capsys, models: str, suite: str, path: Path) -> str:
    """Run ``suite`` in-process on ``models``; the run's usage status and the one message line
    naming ``path``."""
    # a suite module may share its basename with one of ours (test_decomposition): collect it
    # as itself, not as the module already imported under that name
    clash = sys.modules.pop(Path(suite).stem, None)
    try:
        status, text = run_in_process(
            tmp_path, Case("rows", models=models), capsys, suite, collect_only=False
        )
    finally:
        if clash is not None:
            sys.modules[Path(suite).stem] = clash
    assert status == USAGE_ERROR, text[-3000:]
    assert "Traceback" not in text and 'File "' not in text, text[-3000:]
    lines = [line for line in text.splitlines() if line.startswith(f"flipgate: {path}")]
    assert len(lines) == 1, text[-3000:]
    return lines[0]


def _option_order(data: Path) -> str:
    return models_with(f"option_order: {{datasets: [{{name: mmlu_pro, data_files: {data}}}]}}")


@pytest.mark.parametrize(
    "case,rows,fragments",
    [
        ("repeated-id", _edit(_mmlu_pro(), 1, question_id=0), ("'question_id'", "'mmlu_pro/0'")),
        ("null-option", _edit(_mmlu_pro(), 1, options=["a", None, "c"]), ("'options' index 1",)),
        ("same-options", _edit(_mmlu_pro(), 1, options=["x"] * 4), ("indices 0 and 1",)),
        ("options-string", _edit(_mmlu_pro(), 1, options="ABCD"), ("must be a list", "'ABCD'")),
        ("bool-gold", _edit(_mmlu_pro(), 1, answer_index=True), ("'answer_index' value True",)),
        ("long-option", _edit(_mmlu_pro(), 1, options=["a", "b" * 100_000]), ("20,000",)),
    ],
)
def test_bad_rows_end_the_option_order_suite_with_one_line(tmp_path, capsys, case, rows, fragments):
    data = tmp_path / "rows.jsonl"
    _jsonl(data, rows)
    line = _suite_line(tmp_path, capsys, _option_order(data), OPTION_ORDER, data)
    assert "row 1" in line and all(f in line for f in fragments), line


def test_a_non_utf8_file_ends_the_option_order_suite_with_one_line(tmp_path, capsys):
    data = tmp_path / "rows.jsonl"
    data.write_bytes(b'{"question_id": 0, "question": "caf\xe9"}\n')
    line = _suite_line(tmp_path, capsys, _option_order(data), OPTION_ORDER, data)
    assert "not UTF-8 text: byte b'\\xe9' at offset 35" in line, line


def test_a_data_files_folder_ends_the_option_order_suite_with_one_line(tmp_path, capsys):
    data = tmp_path / "rows"
    data.mkdir()
    line = _suite_line(tmp_path, capsys, _option_order(data), OPTION_ORDER, data)
    assert "field 'data_files' names a folder" in line, line


def test_a_repeated_judgebench_pair_id_ends_the_judges_suite_with_one_line(tmp_path, capsys):
    data = tmp_path / "judgebench.jsonl"
    _jsonl(data, _edit(_judgebench(3), 1, pair_id="p0"))
    models = models_with(
        extra_audit=f"judges: {{datasets: [{{name: judgebench, data_files: {data}}}], k: 2}}",
        model="{id: m1, backend: hf, source: {path: /nonexistent}, suites: [judges]}",
    )
    line = _suite_line(tmp_path, capsys, models, JUDGES, data)
    assert "row 1: field 'pair_id'" in line and "'judgebench/p0', as row 0" in line, line


def test_an_agreement_set_folder_ends_the_readouts_suite_with_one_line(tmp_path, capsys):
    folder = tmp_path / "agreement"
    folder.mkdir()
    models = models_with(
        extra_audit="decomposition: {datasets: [basic_arithmetic], axes: [option_order], "
        f"readouts: [regex, judge], judge: {{agreement_set: {folder}}}}}",
        model="{id: m1, backend: hf, source: {path: /nonexistent}, suites: [decomposition]}",
    )
    line = _suite_line(tmp_path, capsys, models, READOUTS, folder)
    assert "'audit.decomposition.judge.agreement_set' names a folder" in line, line
