"""A model's GRID cards as Hugging Face ``.eval_results/*.yaml`` files (the Hub's evaluation
results format: https://huggingface.co/docs/hub/eval-results), built with huggingface_hub's own
``EvalResultEntry`` and ``eval_result_entries_to_yaml`` and read back by its
``parse_eval_result_entries``.

One file per card whose dataset is a Hub benchmark (:data:`flipgate.exports.benchmarks.
HUB_BENCHMARKS`), ``.eval_results/flipgate_<dataset>.yaml``, holding one entry: the value is the
model's accuracy under the canonical option order (the card's ``scores.accuracy_canonical``); the
notes say what it was measured on (N items, split, readout) and carry each order cell's flip rate
with its CI; the source links the card. A dataset with no Hub benchmark is skipped, and said so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flipgate import storage
from flipgate.exports import require
from flipgate.exports.benchmarks import HUB_BENCHMARKS
from flipgate.exports.readout import Value, card_path, cell_readouts

FOLDER = ".eval_results"  # huggingface_hub.constants.EVAL_RESULTS_FOLDER
EVAL_RESULTS = storage.Place(
    "evaluation results file", "--out", "delete it: the export writes it again"
)
SOURCE_NAME = "flipgate GRID card"


def hub(who: str = "export eval-results") -> Any:
    """huggingface_hub, with the ``.eval_results`` types (or a one-line FlipgateError)."""
    return require(
        "huggingface_hub",
        "huggingface_hub (with EvalResultEntry)",
        "--upgrade huggingface_hub",
        who,
        names=("EvalResultEntry", "eval_result_entries_to_yaml", "parse_eval_result_entries"),
    )


@dataclass(frozen=True)
class Skipped:
    dataset: str
    why: str


def notes(card: dict, accuracy: Value) -> str:
    """What the score (``accuracy``) is and what else the card measured, in one paragraph."""
    bench = HUB_BENCHMARKS[card["dataset"]["name"]]
    n = card["dataset"]["n_items"]
    split = f" of the {bench.split} split" if bench.split else ""
    parts = [
        f"flipgate run {card['run']['run_id']}: accuracy under the canonical option order on "
        f"N={n} items{split} ({card['dataset']['sampling']}), readout "
        f"{card['scores']['primary_readout']}, item-clustered bootstrap CI "
        f"{accuracy.text()}"
    ]
    for c in cell_readouts(card):
        if c.flip_rate is None:
            continue
        parts.append(
            f"{'control ' if c.control else ''}{c.cell} flip rate {c.flip_rate.text()} "
            f"(K={c.k} orderings, N={c.n_items}, readout {c.readout})"
        )
    return "; ".join(parts) + "."


def entries(cards: Sequence[dict], source_base: str) -> tuple[dict[str, Any], list[Skipped]]:
    """(file name -> its EvalResultEntry, the cards skipped and why)."""
    hf = hub()
    out: dict[str, Any] = {}
    skipped = []
    for card in cards:
        dataset = card["dataset"]["name"]
        bench = HUB_BENCHMARKS.get(dataset)
        accuracy = Value.of(card["scores"]["accuracy_canonical"])
        if bench is None:
            skipped.append(Skipped(dataset, "no Hugging Face Hub benchmark dataset maps to it"))
            continue
        if accuracy is None:
            skipped.append(Skipped(dataset, "the card has no accuracy estimate"))
            continue
        out[f"flipgate_{dataset}.yaml"] = hf.EvalResultEntry(
            dataset_id=bench.dataset_id,
            task_id=bench.task_id,
            value=accuracy.estimate,
            date=card["run"]["created"],
            source_url=card_path(card, source_base),
            source_name=SOURCE_NAME,
            notes=notes(card, accuracy),
        )
    return out, skipped


def render(entry: Any) -> str:
    """One ``.eval_results`` file: a YAML list of the one entry."""
    hf = hub()
    return yaml.safe_dump(hf.eval_result_entries_to_yaml([entry]), sort_keys=False)


def write(
    repo_dir: Path, cards: Sequence[dict], source_base: str
) -> tuple[list[Path], list[Skipped]]:
    """``repo_dir/.eval_results/flipgate_<dataset>.yaml`` for each card with a Hub benchmark
    (every file rendered before any is written); the paths written and the cards skipped."""
    found, skipped = entries(cards, source_base)
    rendered = [(repo_dir / FOLDER / name, render(entry)) for name, entry in found.items()]
    if rendered:
        storage.ensure_dir(EVAL_RESULTS, repo_dir / FOLDER)
    for path, text in rendered:
        storage.write_text(EVAL_RESULTS, path, text)
    return [path for path, _ in rendered], skipped
