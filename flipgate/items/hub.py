"""Hugging Face hub loaders (``datasets.load_dataset``) mapping upstream rows to :class:`Item`.

Each loader takes ``data_files`` to read local parquet/JSON files in the upstream schema instead of
the hub (how the project tests them offline, and how users audit a mirrored copy).
"""
from __future__ import annotations

from flipgate import FlipgateError
from flipgate.items.item import Item, require
from flipgate.items.offline import labelled_choices_item


def _rows(hub_id: str, split: str, data_files=None, revision: str | None = None, config: str | None = None):
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
        raise FlipgateError(f"could not load dataset {hub_id!r} split {split!r} from {source}: {exc}") from exc


def load_mmlu_pro(dataset: str, split: str = "test", data_files=None, revision=None) -> list[Item]:
    """TIGER-Lab/MMLU-Pro: question, options (4–10), answer_index, question_id, category."""
    rows = _rows("TIGER-Lab/MMLU-Pro", split, data_files, revision)
    items = []
    for i, row in enumerate(rows):
        where = f"{data_files or 'TIGER-Lab/MMLU-Pro'} [{split}] row {i}"
        question, options, gold = require(row, ["question", "options", "answer_index"], where)
        options = [o for o in options if o is not None and str(o).strip() and o != "N/A"]
        if not isinstance(gold, int) or not 0 <= gold < len(options):
            raise FlipgateError(f"{where}: field 'answer_index' value {gold!r} is not an index into options")
        qid = row.get("question_id", i)
        items.append(Item(f"{dataset}/{qid}", dataset, question, tuple(options), gold,
                          {"category": row.get("category")}))
    return items


def load_commonsense_qa_hub(dataset: str, split: str = "validation", data_files=None, revision=None) -> list[Item]:
    """tau/commonsense_qa: id, question, question_concept, choices {label, text}, answerKey."""
    rows = _rows("tau/commonsense_qa", split, data_files, revision)
    return [labelled_choices_item(r, dataset, f"{data_files or 'tau/commonsense_qa'} [{split}] row {i}",
                                  f"{dataset}/{r.get('id') or i}")
            for i, r in enumerate(rows)]
