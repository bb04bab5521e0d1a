"""Allure reporting, the service the suites' ``allure`` modules share: the running test's labels
and parameters (:func:`label_test`), its attachments (JSON, PNG, CSV), the environment file and
one Allure result per GRID card (Facet-Probe/SafetyRepro disclosure). What a suite's test
attaches (its tables and pictures) lives in the suite's package, ``flipgate/<suite>/allure.py``."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flipgate.redact import redact
from flipgate.results import Verdict

if TYPE_CHECKING:
    import pandas as pd
    from pydantic import BaseModel

    from flipgate.cards.write import WrittenCard


def allure_module():
    """The ``allure`` module (allure-pytest), or None where it is not installed."""
    try:
        import allure
    except ImportError:  # allure-pytest is a dependency; tolerate running without it
        return None
    return allure


def dumped(verdicts: list[Verdict]) -> list[dict]:
    """The verdicts as JSON values, as a card section holds them."""
    return [v.model_dump(mode="json") for v in verdicts]


def fmt(x: float | None) -> str:
    """A value to three decimals, "–" for none."""
    return "–" if x is None else f"{x:.3f}"


def label_test(epic: str, feature: str, story: str | None, title: str, parameters: dict[str, Any]):
    """Label the running test (its epic, feature, story unless None, and title) and give it
    ``parameters``, in their order. Returns the ``allure`` module to describe the test and attach
    to it with, or None without allure-pytest (then there is nothing to report)."""
    allure = allure_module()
    if allure is None:
        return None
    allure.dynamic.epic(epic)
    allure.dynamic.feature(feature)
    if story is not None:
        allure.dynamic.story(story)
    allure.dynamic.title(title)
    for key, value in parameters.items():
        allure.dynamic.parameter(key, value)
    return allure


def attach_json(allure, payload: Any, name: str) -> None:
    """Attach ``payload`` to the running test as indented JSON (a value JSON has no form for as
    its ``str``)."""
    allure.attach(
        redact(json.dumps(payload, indent=2, default=str)),
        name=name,
        attachment_type=allure.attachment_type.JSON,
    )


def attach_record(allure, record: BaseModel, verdicts: list[Verdict], name: str) -> None:
    """Attach a suite's record with its verdicts as JSON, the card section the test wrote."""
    attach_json(
        allure, {"record": record.model_dump(mode="json"), "verdicts": dumped(verdicts)}, name
    )


def attach_png(allure, png: bytes, name: str) -> None:
    """Attach a picture (PNG bytes) to the running test."""
    allure.attach(png, name=name, attachment_type=allure.attachment_type.PNG)


def attach_csv(allure, table: pd.DataFrame, name: str) -> None:
    """Attach a table to the running test as CSV (without the index)."""
    allure.attach(table.to_csv(index=False), name=name, attachment_type=allure.attachment_type.CSV)


def write_environment(results_dir: Path, props: dict[str, str]) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(
        f"{k}={redact(str(v)).replace(chr(10), ' ')}\n" for k, v in sorted(props.items())
    )
    (results_dir / "environment.properties").write_text(text)


def add_card_results(results_dir: Path, cards: list[WrittenCard]) -> None:
    """One Allure result per GRID card (epic "GRID card"), with the JSON and Markdown attached."""
    results_dir.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    for written in cards:
        card = written.card
        failed = [v for v in card.thresholds if v.verdict in ("fail", "missing")]
        attachments = []
        for path, mime in (
            (written.json_path, "application/json"),
            (written.markdown_path, "text/markdown"),
        ):
            source = f"{uuid.uuid4()}-attachment{path.suffix}"
            (results_dir / source).write_bytes(path.read_bytes())
            attachments.append({"name": path.name, "source": source, "type": mime})
        name = f"GRID card: {card.model.id} / {card.dataset.name}"
        result = {
            "uuid": str(uuid.uuid4()),
            "historyId": name,
            "name": name,
            "fullName": name,
            "status": "failed" if failed else "passed",
            "stage": "finished",
            "start": now,
            "stop": now,
            "statusDetails": {"message": "; ".join(v.threshold for v in failed)} if failed else {},
            "labels": [
                {"name": "epic", "value": "GRID card"},
                {"name": "feature", "value": card.dataset.name},
                {"name": "story", "value": card.model.id},
            ],
            "attachments": attachments,
        }
        (results_dir / f"{result['uuid']}-result.json").write_text(json.dumps(result))
