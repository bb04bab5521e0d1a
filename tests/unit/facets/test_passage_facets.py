"""Evidence facets: short-answer parsing, normalisation, render/map-back round trip, loaders."""

import pandas as pd
import pytest

from flipgate import FlipgateError
from flipgate.facets import get_facet, readouts_for
from flipgate.grammar import orderings
from flipgate.items import DatasetSpec, Item, Passage, load_items
from flipgate.items.hub import load_hotpotqa, load_multihop_rag, load_musique
from flipgate.readouts import parse_short_answer
from flipgate.scoring import exact_match, normalize_answer


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Answer: Paris", "Paris"),
        ("Answer: The Eiffel Tower.\n", "The Eiffel Tower."),
        ("Answer: Rome\nAnswer: Paris", "Paris"),
        ("Answer: Answer: Answer:", None),
        ("Answer: Oslo\nThe answer is: Oslo", "Oslo"),
        ("Answer: **Lima**", "Lima"),
        ("Answer: ", None),
        ("Answer: Kyiv\nAnswer:", "Kyiv"),
    ],
)
def test_parse_short_answer(text, expected):
    assert parse_short_answer(text) == expected


def test_squad_normalisation_and_em():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a pear") == "apple pear"
    assert exact_match("the Netherlands", ("Netherlands",)) and not exact_match(
        "Holland", ("Netherlands",)
    )
    assert exact_match("NYC", ("New York City", "NYC")) and not exact_match(None, ("x",))


ITEM = Item(
    "q/1",
    "q",
    "Where was Ada born?",
    answer="Nordia",
    aliases=("the Nordia",),
    passages=(
        Passage("Ada was born in Vell.", "Ada", True),
        Passage("Vell is in Nordia.", "Vell", True),
        Passage("Bo was born in Kass.", "Bo"),
        Passage("Kass is in Suth.", "Kass"),
    ),
)


@pytest.mark.parametrize("facet_name", ["evidence_chunk_order", "document_rank_order"])
def test_render_shows_every_passage_once_in_permuted_order(facet_name):
    facet = get_facet(facet_name)
    for perm in orderings("q/1", 4, 6):
        prompt = facet.render(ITEM, perm).messages[0][1]
        positions = [prompt.index(ITEM.passages[src].text) for src in perm]
        assert positions == sorted(positions)  # slot order follows the permutation
        assert prompt.rstrip().endswith("Question: Where was Ada born?")
    request = facet.render(ITEM, (0, 1, 2, 3))
    assert request.labels == () and request.max_new_tokens == 16
    # content labels do not depend on the ordering; EM with aliases
    assert facet.map_back("The Nordia.", ITEM, (3, 2, 1, 0)) == facet.map_back(
        "nordia", ITEM, (0, 1, 2, 3)
    )
    assert facet.is_correct(facet.map_back("the Nordia", ITEM, (1, 0, 3, 2)), ITEM)
    assert facet.map_back(None, ITEM, (0, 1, 2, 3)) is None and facet.n_classes(ITEM, 6) == 6


def test_document_rank_labels_ranks_and_titles():
    prompt = get_facet("document_rank_order").render(ITEM, (2, 0, 1, 3)).messages[0][1]
    assert "Document (rank 1): Bo\nBo was born in Kass." in prompt


def test_facet_unit_bounds():
    chunks, docs = get_facet("evidence_chunk_order"), get_facet("document_rank_order")
    two = Item("q/2", "q", "?", answer="x", passages=ITEM.passages[:2])
    assert docs.keep(two) and not chunks.keep(two) and chunks.keep(ITEM)
    assert not docs.keep(Item("q/3", "q", "?", passages=ITEM.passages))  # no gold answer


def test_letter_readout_is_not_offered_for_free_form():
    assert readouts_for("evidence_chunk_order", ["letter_logprob", "regex"], "letter_logprob") == (
        ["regex"],
        "regex",
    )
    with pytest.raises(FlipgateError, match="needs one of the readouts"):
        readouts_for("evidence_chunk_order", ["letter_logprob"], "letter_logprob")


@pytest.mark.parametrize(
    "name,facet",
    [("synthetic_multihop", "evidence_chunk_order"), ("synthetic_rag", "document_rank_order")],
)
def test_synthetic_sets_are_deterministic_and_answerable(name, facet):
    f = get_facet(facet)
    items = load_items(DatasetSpec(name), 20, keep=f.keep)
    assert len(items) == 20 and [i.item_id for i in items] == [
        i.item_id for i in load_items(DatasetSpec(name), 20)
    ]
    for it in items:
        gold_text = " ".join(p.text for p in it.passages if p.supporting)
        assert it.answer in gold_text and any(not p.supporting for p in it.passages)
        assert f.min_units <= len(it.passages) <= f.max_units


def test_hotpotqa_loader_on_local_parquet(tmp_path):
    titles = [f"T{j}" for j in range(10)]
    rows = [
        {
            "id": "5a8b",
            "question": "Which?",
            "answer": "yes",
            "type": "comparison",
            "level": "hard",
            "supporting_facts": {"title": ["T3", "T7"], "sent_id": [0, 1]},
            "context": {"title": titles, "sentences": [[f"S{j}a. ", f"S{j}b."] for j in range(10)]},
        }
    ]
    path = tmp_path / "validation.parquet"
    pd.DataFrame(rows).to_parquet(path)
    it = load_hotpotqa("hotpotqa", data_files=str(path))[0]
    assert it.item_id == "hotpotqa/5a8b" and it.answer == "yes" and len(it.passages) == 6
    assert [p.title for p in it.passages] == [
        "T0",
        "T1",
        "T2",
        "T3",
        "T4",
        "T7",
    ]  # both gold + 4 distractors
    assert it.passages[3].text == "S3a. S3b." and it.passages[3].supporting


def test_musique_loader_skips_unanswerable(tmp_path):
    paragraphs = [
        {"idx": j, "title": f"P{j}", "paragraph_text": f"text {j}", "is_supporting": j in (5, 9)}
        for j in range(20)
    ]
    rows = [
        {
            "id": "2hop__1",
            "paragraphs": paragraphs,
            "question": "Who?",
            "question_decomposition": [],
            "answer": "Miquette",
            "answer_aliases": ["M. Giraudy"],
            "answerable": True,
        },
        {
            "id": "2hop__2",
            "paragraphs": paragraphs,
            "question": "Who?",
            "question_decomposition": [],
            "answer": "x",
            "answer_aliases": [],
            "answerable": False,
        },
    ]
    path = tmp_path / "musique.parquet"
    pd.DataFrame(rows).to_parquet(path)
    items = load_musique("musique", data_files=str(path))
    assert [i.item_id for i in items] == ["musique/2hop__1"]
    assert items[0].aliases == ("M. Giraudy",) and sum(p.supporting for p in items[0].passages) == 2


def test_multihop_rag_loader(tmp_path):
    ev = [
        {
            "title": f"News {j}",
            "fact": f"fact {j}",
            "author": "a",
            "category": "c",
            "published_at": "d",
            "source": "s",
            "url": "u",
        }
        for j in range(3)
    ]
    rows = [
        {
            "query": "Did X?",
            "answer": "Yes",
            "question_type": "comparison_query",
            "evidence_list": ev,
        },
        {
            "query": "Who?",
            "answer": "Insufficient information.",
            "question_type": "null_query",
            "evidence_list": [],
        },
    ]
    path = tmp_path / "MultiHopRAG.json"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    items = load_multihop_rag("multihop_rag", data_files=str(path))
    assert len(items) == 1 and [p.title for p in items[0].passages] == [
        "News 0",
        "News 1",
        "News 2",
    ]


def test_hotpotqa_row_missing_context(tmp_path):
    path = tmp_path / "bad.parquet"
    pd.DataFrame(
        [
            {
                "id": "a",
                "question": "q",
                "answer": "a",
                "supporting_facts": {"title": [], "sent_id": []},
                "context": None,
            }
        ]
    ).to_parquet(path)
    with pytest.raises(FlipgateError, match="row 0: required field 'context'"):
        load_hotpotqa("hotpotqa", data_files=str(path))
