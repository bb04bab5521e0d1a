"""Hugging Face hub loaders (``datasets.load_dataset``) mapping upstream rows to :class:`Item`.

Each loader takes ``data_files`` to read local parquet/JSON files in the upstream schema instead of
the hub (how the project tests them offline, and how users audit a mirrored copy). Local JSON and
JSON Lines files are read with :mod:`json`, so each cell keeps the type it was written with, and
every row passes :mod:`flipgate.items.validate` before it becomes an item.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from flipgate import FlipgateError
from flipgate.items.item import LETTERS, Item, Passage, require
from flipgate.items.offline import labelled_choices_items
from flipgate.items.validate import (
    RowItems,
    answer_index,
    check_data_file,
    check_utf8,
    option_texts,
)


def records(path: Path):
    """JSON records of a .jsonl or .jsonl.gz file (blank lines skipped); unreadable input is a
    FlipgateError."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        check_utf8(path)
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise FlipgateError(f"{path} line {n}: not valid JSON ({exc})") from exc
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise FlipgateError(f"cannot read {path}: {exc}") from exc


def _json_rows(path: Path) -> list[dict]:
    """The rows of a local JSON file (an array of objects) or JSON Lines file, with the types JSON
    gives them: the datasets JSON loader coerces a column of mixed types (a "1" among integers is
    read as 1), so a bad cell would pass the row checks."""
    rows = None
    if path.name.endswith(".json"):
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            pass  # JSON Lines in a .json file
    if not isinstance(rows, list):
        rows = list(records(path))
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise FlipgateError(f"{path} row {i}: not a JSON object (value: {row!r:.60})")
    return rows


def _rows(
    hub_id: str, split: str, data_files=None, revision: str | None = None, config: str | None = None
):
    """Rows from ``data_files`` (parquet/JSON in the upstream schema) or from the hub."""
    from datasets import load_dataset

    paths = [data_files] if isinstance(data_files, (str, Path)) else list(data_files or ())
    for path in paths:
        check_data_file(path)
    if paths and all(Path(p).is_file() and str(p).endswith((".json", ".jsonl")) for p in paths):
        return [row for path in paths for row in _json_rows(Path(path))]
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
            f"could not load dataset {hub_id!r} split {split!r} from {source}: "
            + " ".join(str(exc).split())  # one line
        ) from exc


def load_mmlu_pro(dataset: str, split: str = "test", data_files=None, revision=None) -> list[Item]:
    """TIGER-Lab/MMLU-Pro: question, options (4–10), answer_index, question_id, category."""
    rows = _rows("TIGER-Lab/MMLU-Pro", split, data_files, revision)
    items = RowItems("question_id", gold_field="answer_index")
    for i, row in enumerate(rows):
        where = f"{data_files or 'TIGER-Lab/MMLU-Pro'} [{split}] row {i}"
        question, options, gold = require(row, ["question", "options", "answer_index"], where)
        options = option_texts(options, where, distinct=False)
        gold = answer_index(gold, len(options), where, "answer_index")
        kept = [j for j, o in enumerate(options) if o != "N/A"]  # upstream placeholder options
        if gold not in kept:
            raise FlipgateError(f"{where}: field 'answer_index' value {gold} is an 'N/A' option")
        items.add(
            Item(
                f"{dataset}/{row.get('question_id', i)}",
                dataset,
                question,
                tuple(options[j] for j in kept),
                kept.index(gold),
                {"category": row.get("category")},
            ),
            where,
            i,
        )
    return items.items


def load_commonsense_qa_hub(
    dataset: str, split: str = "validation", data_files=None, revision=None
) -> list[Item]:
    """tau/commonsense_qa: id, question, question_concept, choices {label, text}, answerKey."""
    rows = _rows("tau/commonsense_qa", split, data_files, revision)
    return labelled_choices_items(rows, dataset, f"{data_files or 'tau/commonsense_qa'} [{split}]")


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
    items = RowItems("id")
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
        items.add(
            Item(
                f"{dataset}/{row.get('id', i)}",
                dataset,
                question,
                answer=answer,
                passages=_select_passages(passages, max_passages),
                meta={"type": row.get("type"), "level": row.get("level")},
            ),
            where,
            i,
        )
    return items.items


def load_musique(
    dataset: str, split: str = "validation", data_files=None, revision=None, max_passages: int = 6
) -> list[Item]:
    """dgslibisey/MuSiQue: paragraphs [{idx, title, paragraph_text, is_supporting}], answer,
    answer_aliases."""
    rows = _rows("dgslibisey/MuSiQue", split, data_files, revision)
    items = RowItems("id")
    for i, row in enumerate(rows):
        where = f"{data_files or 'dgslibisey/MuSiQue'} [{split}] row {i}"
        question, answer, paragraphs = require(row, ["question", "answer", "paragraphs"], where)
        if row.get("answerable") is False:
            continue
        passages = [
            Passage(p["paragraph_text"], p.get("title", ""), bool(p.get("is_supporting")))
            for p in paragraphs
        ]
        items.add(
            Item(
                f"{dataset}/{row.get('id', i)}",
                dataset,
                question,
                answer=answer,
                aliases=tuple(row.get("answer_aliases") or ()),
                passages=_select_passages(passages, max_passages),
            ),
            where,
            i,
        )
    return items.items


def load_multihop_rag(
    dataset: str, split: str = "train", data_files=None, revision=None
) -> list[Item]:
    """yixuantt/MultiHopRAG (config MultiHopRAG): query, answer, question_type, evidence_list
    [{title, fact}]. Null queries (no answer in the corpus) are skipped."""
    rows = _rows("yixuantt/MultiHopRAG", split, data_files, revision, config="MultiHopRAG")
    items = RowItems("row")
    for i, row in enumerate(rows):
        where = f"{data_files or 'yixuantt/MultiHopRAG'} [{split}] row {i}"
        query, answer, evidence = require(row, ["query", "answer", "evidence_list"], where)
        if row.get("question_type") == "null_query":
            continue
        passages = tuple(Passage(e["fact"], e.get("title", ""), True) for e in evidence)
        items.add(
            Item(
                f"{dataset}/{i}",
                dataset,
                query,
                answer=answer,
                passages=passages,
                meta={"question_type": row.get("question_type")},
            ),
            where,
            i,
        )
    return items.items


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
    items = RowItems(id_field)
    for i, row in enumerate(rows):
        where = f"{source} [{split}] row {i}"
        if skip(row):
            continue
        question, options, answer, images = require(
            row, ["question", "options", "answer", image_field], where
        )
        options = [
            re.sub(r"^\(?[A-Z][.)]\s*", "", o).strip()
            for o in option_texts(options, where, distinct=False)
        ]
        items.add(
            Item(
                f"{dataset}/{row.get(id_field, i)}",
                dataset,
                question,
                tuple(options),
                _letter_gold(answer, options, where),
                images=tuple(_image_bytes(im, where) for im in images),
            ),
            where,
            i,
        )
    return items.items


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
    items = RowItems("id")
    for i, row in enumerate(rows):
        where = f"{data_files or 'MathLLMs/MathVision'} [{split}] row {i}"
        if not row.get("options"):
            continue
        question, options, answer, image = require(
            row, ["question", "options", "answer", "decoded_image"], where
        )
        question = question.replace("<image1>", "").strip()
        options = option_texts(options, where)
        items.add(
            Item(
                f"{dataset}/{row.get('id', i)}",
                dataset,
                question,
                tuple(options),
                _letter_gold(answer, options, where),
                images=(_image_bytes(image, where),),
                meta={"subject": row.get("subject"), "level": row.get("level")},
            ),
            where,
            i,
        )
    return items.items


def load_medxpertqa(
    dataset: str, split: str = "test", data_files=None, revision=None
) -> list[Item]:
    """TsinghuaC3I/MedXpertQA (config Text): id, question (with an "Answer Choices:" tail), options
    {A: ..., ...}, label (the gold letter)."""
    rows = _rows("TsinghuaC3I/MedXpertQA", split, data_files, revision, config="Text")
    items = RowItems("id")
    for i, row in enumerate(rows):
        where = f"{data_files or 'TsinghuaC3I/MedXpertQA'} [{split}] row {i}"
        question, options = require(row, ["question", "options"], where)
        gold = row.get("label") or row.get("answer")
        if not isinstance(options, dict):
            raise FlipgateError(
                f"{where}: field 'options' must map letters to options (value: {options!r:.80})"
            )
        # a struct column gives every row every letter; a row's absent options are its last
        # letters, null (a null before a present option would shift the gold letter)
        letters = sorted(options)
        while letters and options[letters[-1]] is None:
            letters.pop()
        if letters != list(LETTERS[: len(letters)]):
            raise FlipgateError(
                f"{where}: field 'options' must map the letters A, B, ... in turn to options "
                f"(value: {options!r:.80})"
            )
        fields = tuple(f"options.{k}" for k in letters)
        texts = option_texts([options[k] for k in letters], where, fields)
        question = re.split(r"\n?\s*Answer Choices:", question)[0].strip()
        items.add(
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
            ),
            where,
            i,
        )
    return items.items
