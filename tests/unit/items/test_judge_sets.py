"""Candidate-set loaders for the LLM judge: RewardBench 2 and JudgeBench on local files in the
upstream schemas (the hub is not reachable from the tests), answer sets from offline ARC/MMLU."""

import re

import pandas as pd
import pytest
from support.hub_rows import rejects_row
from support.judge_sets import jb_rows, write_jsonl

from flipgate import FlipgateError
from flipgate.items import DatasetSpec, load_items
from flipgate.items.judge_sets import (
    load_answer_sets,
    load_judgebench,
    load_rewardbench2,
    refers_to_other_options,
)
from flipgate.items.offline import load_arc, load_mmlu
from flipgate.items.registry import loader_options

# ---------------------------------------------------------------------------------------------
# RewardBench 2


def _rb2_row(i: int, subset: str = "Factuality", n_chosen: int = 1) -> dict:
    chosen = [f"correct answer {i}.{k}" for k in range(n_chosen)]
    rejected = [f"wrong answer {i}.{k}" for k in range(3)]
    return {
        "id": str(i),
        "prompt": f"Question {i}?",
        "chosen": chosen,
        "rejected": rejected,
        "num_correct": len(chosen),
        "num_incorrect": len(rejected),
        "total_completions": len(chosen) + len(rejected),
        "models": ["model-x"] * (len(chosen) + len(rejected)),
        "subset": subset,
        "additional_metadata": {"category": "c", "correct": None, "index": float(i)},
    }


def _rb2_rows() -> list[dict]:
    return [_rb2_row(i) for i in range(12)] + [
        _rb2_row(12, subset="Math"),
        _rb2_row(13, subset="Ties", n_chosen=2),
        _rb2_row(14, n_chosen=2),  # a Factuality row with two correct responses
    ]


def _write_parquet(rows: list[dict], path) -> str:
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


def test_rewardbench2_gold_option_is_the_chosen_response_after_shuffling(tmp_path):
    path = _write_parquet(_rb2_rows(), tmp_path / "test-00000-of-00001.parquet")
    items = load_rewardbench2("rewardbench2_factuality", data_files=path)
    assert len(items) == 12
    for item in items:
        i = item.meta["original_id"]
        assert item.question == f"Question {i}?"
        assert item.n_options == 4 and item.gold is not None
        assert item.options[item.gold] == f"correct answer {i}.0"
        assert sorted(item.options) == sorted(
            [f"correct answer {i}.0"] + [f"wrong answer {i}.{k}" for k in range(3)]
        )
    # the source lists the chosen response first: the shuffle must move it somewhere else too
    assert len({item.gold for item in items}) > 1


def test_rewardbench2_keeps_the_subset_and_drops_rows_with_two_chosen(tmp_path):
    path = _write_parquet(_rb2_rows(), tmp_path / "rb2.parquet")
    factuality = load_rewardbench2("rb2", data_files=path)
    assert {it.meta["original_id"] for it in factuality} == {str(i) for i in range(12)}
    assert all(it.meta["source"] == "Factuality" for it in factuality)
    math = load_rewardbench2("rb2", subset="Math", data_files=path)
    assert [it.item_id for it in math] == ["rb2/12"] and math[0].meta["source"] == "Math"
    assert load_rewardbench2("rb2", subset="Ties", data_files=path) == []


def test_rewardbench2_ids_and_order_are_deterministic(tmp_path):
    path = _write_parquet(_rb2_rows(), tmp_path / "rb2.parquet")
    first = load_rewardbench2("rb2", data_files=path)
    again = load_rewardbench2("rb2", data_files=path)
    assert [it.item_id for it in first] == [f"rb2/{i}" for i in range(12)]
    assert [(it.options, it.gold) for it in first] == [(it.options, it.gold) for it in again]


def test_rewardbench2_unknown_subset_names_the_subsets_present(tmp_path):
    path = _write_parquet(_rb2_rows(), tmp_path / "rb2.parquet")
    with pytest.raises(FlipgateError, match=r"no rows of subset 'Factulity'.*Factuality, Math"):
        load_rewardbench2("rb2", subset="Factulity", data_files=path)


@pytest.mark.parametrize("field", ["prompt", "chosen", "rejected", "id"])
def test_rewardbench2_row_missing_field_names_file_row_and_field(tmp_path, field):
    rejects_row(
        load_rewardbench2,
        _rb2_rows(),
        tmp_path / "bad.parquet",
        3,
        field,
        None,
        rf"bad.parquet \[test\] row 3: required field '{field}' is missing",
    )


def test_rewardbench2_empty_response_is_named(tmp_path):
    rows = _rb2_rows()
    rows[2]["rejected"] = ["wrong", "  ", "also wrong"]
    path = _write_parquet(rows, tmp_path / "bad.parquet")
    with pytest.raises(FlipgateError, match=r"bad.parquet \[test\] row 2: field 'rejected'"):
        load_rewardbench2("rb2", data_files=path)


# ---------------------------------------------------------------------------------------------
# JudgeBench


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_judgebench_label_maps_a_over_b_to_0_and_b_over_a_to_1(tmp_path, kind):
    rows = jb_rows()
    if kind == "jsonl":
        path = write_jsonl(rows, tmp_path / "gpt-00000-of-00001.jsonl")
    else:
        path = _write_parquet(rows, tmp_path / "gpt-00000-of-00001.parquet")
    items = load_judgebench("judgebench", data_files=path)
    assert len(items) == 8
    for row, item in zip(rows, items):
        assert item.item_id == f"judgebench/{row['pair_id']}"
        assert item.question == row["question"]
        assert item.options == (row["response_A"], row["response_B"])  # source order, no shuffle
        assert item.gold == {"A>B": 0, "B>A": 1}[row["label"]]
        assert item.meta["source"] == row["source"]  # the full bucket string
        expected_id = None if row["original_id"] is None else str(row["original_id"])
        assert item.meta["original_id"] == expected_id  # parquet widens the column to float
        assert item.meta["response_model"] == "gpt-4o-2024-05-13"
    assert [it.gold for it in items] == [1, 0, 0, 1, 0, 0, 1, 0]


def test_judgebench_split_argument_names_the_split(tmp_path):
    path = write_jsonl(jb_rows(), tmp_path / "claude-00000-of-00001.jsonl")
    items = load_judgebench("judgebench", split="claude", data_files=path)
    assert len(items) == 8
    rows = jb_rows()
    rows[5]["question"] = ""
    bad = write_jsonl(rows, tmp_path / "bad.jsonl")
    with pytest.raises(FlipgateError, match=r"bad.jsonl \[claude\] row 5: required field"):
        load_judgebench("judgebench", split="claude", data_files=bad)


@pytest.mark.parametrize("label", ["A=B", "A>>B", "B>a"])
def test_judgebench_bad_label_is_a_clear_error(tmp_path, label):
    rows = jb_rows()
    rows[4]["label"] = label
    path = write_jsonl(rows, tmp_path / "bad.jsonl")
    with pytest.raises(
        FlipgateError,
        match=rf"bad.jsonl \[gpt\] row 4: field 'label' value '{re.escape(label)}' is not one of",
    ):
        load_judgebench("judgebench", data_files=path)


@pytest.mark.parametrize("field", ["response_B", "label", "source", "pair_id"])
def test_judgebench_row_missing_field_names_file_row_and_field(tmp_path, field):
    rejects_row(
        load_judgebench,
        jb_rows(),
        tmp_path / "bad.parquet",
        6,
        field,
        None,
        rf"bad.parquet \[gpt\] row 6: required field '{field}' is missing",
    )


def test_judgebench_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FlipgateError, match="could not load dataset 'ScalerLab/JudgeBench'"):
        load_judgebench("judgebench", data_files=str(tmp_path / "missing.jsonl"))


# ---------------------------------------------------------------------------------------------
# Answer sets from the offline ARC / MMLU


def _originals(source: str):
    if source == "mmlu":
        return {f"mmlu/{it.item_id.removeprefix('x/')}": it for it in load_mmlu("x")}
    subset = {"arc_challenge": "ARC-Challenge", "arc_easy": "ARC-Easy"}[source]
    return {f"{source}/{it.item_id.removeprefix('x/')}": it for it in load_arc(subset, "x")}


@pytest.mark.slow
@pytest.mark.parametrize("source", ["arc_challenge", "arc_easy", "mmlu"])
def test_answer_sets_are_four_distinct_full_sentence_answers_with_the_answer_key_gold(source):
    items = load_answer_sets(f"{source}_answers", source)
    originals = _originals(source)
    assert len(items) > 0.85 * len(originals)
    assert len({it.item_id for it in items}) == len(items)
    for item in items:
        assert item.dataset == f"{source}_answers"
        assert item.n_options == 4 and len({o.lower() for o in item.options}) == 4
        assert all(o.startswith("The answer is ") and o.endswith(".") for o in item.options)
        assert not any("of the above" in o.lower() for o in item.options)
        assert item.gold is not None and 0 <= item.gold < 4
        original = originals[item.meta["original_id"]]
        assert item.item_id == f"{source}:{item.meta['original_id'].removeprefix(source + '/')}"
        assert item.question == original.question
        gold_option = original.options[original.gold].strip().rstrip(".")
        assert item.options[item.gold] == f"The answer is {gold_option}."
        assert item.meta["source"] == original.meta.get("subject", source)
    # the answer keys are spread over the positions: no position holds most golds
    counts = [sum(it.gold == k for it in items) for k in range(4)]
    assert max(counts) < 0.4 * len(items)


def test_answer_sets_mmlu_source_buckets_are_the_subjects():
    items = load_answer_sets("mmlu_answers", "mmlu")
    assert len({it.meta["source"] for it in items}) == 57
    assert items[0].item_id.startswith("mmlu:abstract_algebra/")


def test_answer_sets_unknown_source_is_a_clear_error():
    with pytest.raises(FlipgateError, match="field 'source' value 'arc' is not one of"):
        load_answer_sets("x", "arc")


@pytest.mark.parametrize(
    "option,refers",
    [
        ("All of the above", True),
        ("none of the above.", True),
        ("None of above.", True),
        ("All the above", True),
        ("Either of these", True),
        ("Both", True),
        ("Neither (a) nor (b).", True),
        ("A and B only", True),
        ("Both A & C", True),
        ("b and c", True),
        ("(A), (B), and (C)", True),
        ("the list of choices", True),
        ("Core", False),
        ("Inner core", False),
        ("Vitamin C", False),
        ("I and II only", False),
        ("P(A, B | C) * P(C)", False),
        ("Consistent. Consistent valuation when A and D are true and B and C are false", False),
        ("The Moon's core has a much greater density than the Sun's core.", False),
    ],
)
def test_options_that_refer_to_other_options_are_recognised(option, refers):
    assert refers_to_other_options(option) is refers


def test_answer_sets_load_through_the_registry():
    spec = DatasetSpec.parse("arc_challenge_answers", "t")
    items = load_items(spec, 5)
    assert len(items) == 5 and len({it.item_id for it in items}) == 5
    assert all(it.item_id.startswith("arc_challenge:") and it.n_options == 4 for it in items)
    assert [it.item_id for it in load_items(spec, 5)] == [it.item_id for it in items]
    assert load_items(DatasetSpec.parse("mmlu_answers", "t"), 3)[0].item_id.startswith("mmlu:")


def test_judge_set_datasets_take_the_hub_options():
    assert loader_options("rewardbench2_factuality") == [
        "subset",
        "split",
        "data_files",
        "revision",
    ]
    assert loader_options("judgebench") == ["split", "data_files", "revision"]
    spec = DatasetSpec.parse(
        {"name": "judgebench", "split": "claude", "data_files": "x.jsonl"}, "models.yaml"
    )
    assert dict(spec.options) == {"split": "claude", "data_files": "x.jsonl"}
    with pytest.raises(FlipgateError, match="takes no such option"):
        DatasetSpec.parse({"name": "arc_easy_answers", "data_files": "x"}, "models.yaml")
