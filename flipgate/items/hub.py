"""Hugging Face hub loaders (``datasets.load_dataset``) mapping upstream rows to :class:`Item`.

Each loader takes ``data_files`` to read local parquet/JSON files in the upstream schema instead of
the hub (how the project tests them offline, and how users audit a mirrored copy).
"""

from __future__ import annotations

import re

from flipgate import FlipgateError
from flipgate.items.item import LETTERS, Item, Passage, require
from flipgate.items.offline import labelled_choices_item


def _rows(
    hub_id: str, split: str, data_files=None, revision: str | None = None, config: str | None = None
):
    """Rows from ``data_files`` (parquet/JSON in the upstream schema) or from the hub."""
    from datasets import load_dataset

    try:
        if data_files:
            kind = "json" if str(data_files).endswith((".json", ".jsonl")) else "parquet"
            return load_dataset(kind, data_files={split: data_files}, split=split)
        return load_dataset(hub_id, config, split=split, revision=revision)
    except FlipgateError:
        raise
    except Exception as exc:  # datasets raises many types; the user needs which source failed
        source = data_files or f"hub:{hub_id}"
        raise FlipgateError(
            f"could not load dataset {hub_id!r} split {split!r} from {source}: {exc}"
        ) from exc


def load_mmlu_pro(dataset: str, split: str = "test", data_files=None, revision=None) -> list[Item]:
    """TIGER-Lab/MMLU-Pro: question, options (4–10), answer_index, question_id, category."""
    rows = _rows("TIGER-Lab/MMLU-Pro", split, data_files, revision)
    items = []
    for i, row in enumerate(rows):
        where = f"{data_files or 'TIGER-Lab/MMLU-Pro'} [{split}] row {i}"
        question, options, gold = require(row, ["question", "options", "answer_index"], where)
        options = [o for o in options if o is not None and str(o).strip() and o != "N/A"]
        if not isinstance(gold, int) or not 0 <= gold < len(options):
            raise FlipgateError(
                f"{where}: field 'answer_index' value {gold!r} is not an index into options"
            )
        qid = row.get("question_id", i)
        items.append(
            Item(
                f"{dataset}/{qid}",
                dataset,
                question,
                tuple(options),
                gold,
                {"category": row.get("category")},
            )
        )
    return items


def load_commonsense_qa_hub(
    dataset: str, split: str = "validation", data_files=None, revision=None
) -> list[Item]:
    """tau/commonsense_qa: id, question, question_concept, choices {label, text}, answerKey."""
    rows = _rows("tau/commonsense_qa", split, data_files, revision)
    return [
        labelled_choices_item(
            r,
            dataset,
            f"{data_files or 'tau/commonsense_qa'} [{split}] row {i}",
            f"{dataset}/{r.get('id') or i}",
        )
        for i, r in enumerate(rows)
    ]


def _select_passages(passages: list[Passage], limit: int) -> tuple[Passage, ...]:
    """All supporting passages plus the first distractors, up to ``limit``, in source order."""
    n_distractors = max(0, limit - sum(p.supporting for p in passages))
    keep, seen = [], 0
    for p in passages:
        if p.supporting:
            keep.append(p)
        elif seen < n_distractors:
            keep.append(p)
            seen += 1
    return tuple(keep)


def load_hotpotqa(
    dataset: str, split: str = "validation", data_files=None, revision=None, max_passages: int = 6
) -> list[Item]:
    """hotpotqa/hotpot_qa (distractor): context {title, sentences}, supporting_facts {title,
    sent_id}."""
    rows = _rows("hotpotqa/hotpot_qa", split, data_files, revision, config="distractor")
    items = []
    for i, row in enumerate(rows):
        where = f"{data_files or 'hotpotqa/hotpot_qa'} [{split}] row {i}"
        question, answer, context, support = require(
            row, ["question", "answer", "context", "supporting_facts"], where
        )
        gold_titles = set(support.get("title") or [])
        titles, sentences = context.get("title") or [], context.get("sentences") or []
        if len(titles) != len(sentences):
            raise FlipgateError(
                f"{where}: field 'context' has {len(titles)} titles but "
                f"{len(sentences)} sentence lists"
            )
        passages = [Passage("".join(s), t, t in gold_titles) for t, s in zip(titles, sentences)]
        items.append(
            Item(
                f"{dataset}/{row.get('id', i)}",
                dataset,
                question,
                answer=answer,
                passages=_select_passages(passages, max_passages),
                meta={"type": row.get("type"), "level": row.get("level")},
            )
        )
    return items


def load_musique(
    dataset: str, split: str = "validation", data_files=None, revision=None, max_passages: int = 6
) -> list[Item]:
    """dgslibisey/MuSiQue: paragraphs [{idx, title, paragraph_text, is_supporting}], answer,
    answer_aliases."""
    rows = _rows("dgslibisey/MuSiQue", split, data_files, revision)
    items = []
    for i, row in enumerate(rows):
        where = f"{data_files or 'dgslibisey/MuSiQue'} [{split}] row {i}"
        question, answer, paragraphs = require(row, ["question", "answer", "paragraphs"], where)
        if row.get("answerable") is False:
            continue
        passages = [
            Passage(p["paragraph_text"], p.get("title", ""), bool(p.get("is_supporting")))
            for p in paragraphs
        ]
        items.append(
            Item(
                f"{dataset}/{row.get('id', i)}",
                dataset,
                question,
                answer=answer,
                aliases=tuple(row.get("answer_aliases") or ()),
                passages=_select_passages(passages, max_passages),
            )
        )
    return items


def load_multihop_rag(
    dataset: str, split: str = "train", data_files=None, revision=None
) -> list[Item]:
    """yixuantt/MultiHopRAG (config MultiHopRAG): query, answer, question_type, evidence_list
    [{title, fact}]. Null queries (no answer in the corpus) are skipped."""
    rows = _rows("yixuantt/MultiHopRAG", split, data_files, revision, config="MultiHopRAG")
    items = []
    for i, row in enumerate(rows):
        where = f"{data_files or 'yixuantt/MultiHopRAG'} [{split}] row {i}"
        query, answer, evidence = require(row, ["query", "answer", "evidence_list"], where)
        if row.get("question_type") == "null_query":
            continue
        passages = tuple(Passage(e["fact"], e.get("title", ""), True) for e in evidence)
        items.append(
            Item(
                f"{dataset}/{i}",
                dataset,
                query,
                answer=answer,
                passages=passages,
                meta={"question_type": row.get("question_type")},
            )
        )
    return items


def _image_bytes(value, where: str) -> bytes:
    """Encoded bytes of a dataset image cell (a PIL image, or {"bytes": ..., "path": ...})."""
    import io

    if isinstance(value, dict) and value.get("bytes"):
        return value["bytes"]
    if hasattr(value, "save"):
        buf = io.BytesIO()
        value.convert("RGB").save(buf, format="PNG")
        return buf.getvalue()
    raise FlipgateError(
        f"{where}: an image cell is neither an image nor encoded bytes "
        f"(value: {type(value).__name__})"
    )


def _letter_gold(answer, options: list[str], where: str) -> int:
    """Gold index from a letter ("B", "(B)") or from the option text itself."""
    text = str(answer).strip().strip("()").strip()
    if len(text) == 1 and text.upper() in LETTERS[: len(options)]:
        return LETTERS.index(text.upper())
    stripped = [re.sub(r"^\(?[A-Z][.)]\s*", "", o).strip() for o in options]
    if text in stripped:
        return stripped.index(text)
    raise FlipgateError(
        f"{where}: field 'answer' value {answer!r} is neither an option letter nor an option"
    )


def _image_mcq_items(
    rows,
    dataset: str,
    source: str,
    split: str,
    image_field: str,
    id_field: str,
    skip=lambda row: False,
) -> list[Item]:
    items = []
    for i, row in enumerate(rows):
        where = f"{source} [{split}] row {i}"
        if skip(row):
            continue
        question, options, answer, images = require(
            row, ["question", "options", "answer", image_field], where
        )
        options = [re.sub(r"^\(?[A-Z][.)]\s*", "", str(o)).strip() for o in options]
        items.append(
            Item(
                f"{dataset}/{row.get(id_field, i)}",
                dataset,
                question,
                tuple(options),
                _letter_gold(answer, options, where),
                images=tuple(_image_bytes(im, where) for im in images),
            )
        )
    return items


def load_mantis_eval(
    dataset: str, split: str = "test", data_files=None, revision=None
) -> list[Item]:
    """TIGER-Lab/Mantis-Eval (config mantis_eval): id, question_type, question, images, options,
    answer. Short-answer rows are skipped (image_set_order scores option choices)."""
    rows = _rows("TIGER-Lab/Mantis-Eval", split, data_files, revision, config="mantis_eval")
    return _image_mcq_items(
        rows,
        dataset,
        data_files or "TIGER-Lab/Mantis-Eval",
        split,
        "images",
        "id",
        skip=lambda row: row.get("question_type") not in (None, "multi-choice"),
    )


def load_medframeqa(
    dataset: str, split: str = "test", data_files=None, revision=None
) -> list[Item]:
    """SuhaoYu1020/MedFrameQA: question_id, question, options, image (2–5 frames), answer."""
    rows = _rows("SuhaoYu1020/MedFrameQA", split, data_files, revision)
    return _image_mcq_items(
        rows, dataset, data_files or "SuhaoYu1020/MedFrameQA", split, "image", "question_id"
    )


def load_mathvision(
    dataset: str, split: str = "test", data_files=None, revision=None
) -> list[Item]:
    """MathLLMs/MathVision: id, question, options, decoded_image, answer (a letter when options
    exist). Rows without options (free-form answers) are skipped: option_order needs options."""
    rows = _rows("MathLLMs/MathVision", split, data_files, revision)
    items = []
    for i, row in enumerate(rows):
        where = f"{data_files or 'MathLLMs/MathVision'} [{split}] row {i}"
        if not row.get("options"):
            continue
        question, options, answer, image = require(
            row, ["question", "options", "answer", "decoded_image"], where
        )
        question = question.replace("<image1>", "").strip()
        items.append(
            Item(
                f"{dataset}/{row.get('id', i)}",
                dataset,
                question,
                tuple(options),
                _letter_gold(answer, list(options), where),
                images=(_image_bytes(image, where),),
                meta={"subject": row.get("subject"), "level": row.get("level")},
            )
        )
    return items


def load_medxpertqa(
    dataset: str, split: str = "test", data_files=None, revision=None
) -> list[Item]:
    """TsinghuaC3I/MedXpertQA (config Text): id, question (with an "Answer Choices:" tail), options
    {A: ..., ...}, label (the gold letter)."""
    rows = _rows("TsinghuaC3I/MedXpertQA", split, data_files, revision, config="Text")
    items = []
    for i, row in enumerate(rows):
        where = f"{data_files or 'TsinghuaC3I/MedXpertQA'} [{split}] row {i}"
        question, options = require(row, ["question", "options"], where)
        gold = row.get("label") or row.get("answer")
        if not isinstance(options, dict):
            raise FlipgateError(
                f"{where}: field 'options' must map letters to options (value: {options!r:.80})"
            )
        letters = sorted(k for k, v in options.items() if v is not None)
        texts = [options[k] for k in letters]
        question = re.split(r"\n?\s*Answer Choices:", question)[0].strip()
        items.append(
            Item(
                f"{dataset}/{row.get('id', i)}",
                dataset,
                question,
                tuple(texts),
                _letter_gold(gold, texts, where),
                meta={
                    "medical_task": row.get("medical_task"),
                    "body_system": row.get("body_system"),
                },
            )
        )
    return items
