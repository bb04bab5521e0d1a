"""The paraphrase store and its gate (docs/definitions.md §8; flipbench's paraphrase gate).

``fixtures/paraphrases/*.jsonl``: one rewrite of one item's question per line::

    {"item_id": "mmlu_philosophy/philosophy/12", "paraphrase_id": "p1", "text": "...",
     "generator": "human:flipgate", "checks": {"meaning": "pass", "difficulty": "pass"},
     "checked_by": "...", "note": "..."}

A check is ``pass``, ``fail`` or ``null`` (not yet checked). The paraphrase axis uses only rewrites
whose two checks passed; a run is stopped (the gate fails) when a rewrite of one of its items is
still unchecked, or when none of its items has a usable rewrite. Rejected rewrites (a failed
check) stay in the store, are never used, and are counted in the gate's report.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from flipgate import FlipgateError

CHECKS = ("meaning", "difficulty")
CHECK_VALUES = ("pass", "fail", None)


@dataclass(frozen=True)
class Paraphrase:
    item_id: str
    paraphrase_id: str
    text: str
    generator: str
    checks: dict[str, str | None] = field(default_factory=dict)
    checked_by: str | None = None
    note: str | None = None

    @property
    def status(self) -> str:
        """``usable`` (every check passed), ``rejected`` (a check failed) or ``unchecked``."""
        values = [self.checks.get(c) for c in CHECKS]
        if "fail" in values:
            return "rejected"
        return "usable" if all(v == "pass" for v in values) else "unchecked"

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None})


def _record(line: str, where: str) -> Paraphrase:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise FlipgateError(f"{where}: not a JSON object ({exc.msg})") from None
    if not isinstance(row, dict):
        raise FlipgateError(f"{where}: not a JSON object (value: {row!r})")
    for name in ("item_id", "paraphrase_id", "text", "generator"):
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise FlipgateError(
                f"{where}: field {name!r} must be a non-empty string (value: {row.get(name)!r})"
            )
    checks = row.get("checks") or {}
    if not isinstance(checks, dict):
        raise FlipgateError(f"{where}: field 'checks' must be a mapping (value: {checks!r})")
    for name, value in checks.items():
        if name not in CHECKS or value not in CHECK_VALUES:
            raise FlipgateError(
                f"{where}: field checks.{name}: known checks are {list(CHECKS)}, each pass, fail "
                f"or null (value: {value!r})"
            )
    unknown = set(row) - {f for f in Paraphrase.__dataclass_fields__}
    if unknown:
        raise FlipgateError(f"{where}: unknown field(s) {sorted(unknown)}")
    return Paraphrase(**{**row, "checks": dict(checks)})


@dataclass(frozen=True)
class GateReport:
    """What the paraphrase gate found for the items of one run."""

    passed: bool
    reason: str
    usable: int
    rejected: int
    unchecked: int
    items_with_rewrites: int
    items: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ParaphraseStore:
    """Every rewrite in a folder of ``*.jsonl`` files, by item id."""

    def __init__(self, records: list[Paraphrase], source: str = "(in memory)"):
        self.source = source
        self.by_item: dict[str, list[Paraphrase]] = {}
        seen: set[tuple[str, str]] = set()
        for p in records:
            if (p.item_id, p.paraphrase_id) in seen:
                raise FlipgateError(
                    f"{source}: duplicate paraphrase_id {p.paraphrase_id!r} for item {p.item_id!r}"
                )
            seen.add((p.item_id, p.paraphrase_id))
            self.by_item.setdefault(p.item_id, []).append(p)

    @classmethod
    def load(cls, folder: Path | str) -> ParaphraseStore:
        folder = Path(folder)
        records = []
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            for n, line in enumerate(path.read_text().splitlines(), start=1):
                if line.strip():
                    records.append(_record(line, f"{path} line {n}"))
        return cls(records, str(folder))

    def all(self, item_id: str) -> list[Paraphrase]:
        return list(self.by_item.get(item_id, []))

    def usable(self, item_id: str) -> list[Paraphrase]:
        """The rewrites of ``item_id`` the axis shows, in store order."""
        return [p for p in self.all(item_id) if p.status == "usable"]

    def gate(self, item_ids: list[str]) -> GateReport:
        """docs/definitions.md §8 paraphrase gate over the items a run uses."""
        mine = [p for i in item_ids for p in self.all(i)]
        count = {s: sum(p.status == s for p in mine) for s in ("usable", "rejected", "unchecked")}
        with_rewrites = sum(bool(self.usable(i)) for i in item_ids)
        if count["unchecked"]:
            waiting = [f"{p.item_id}#{p.paraphrase_id}" for p in mine if p.status == "unchecked"]
            reason = (
                f"{count['unchecked']} rewrite(s) in {self.source} are not checked for meaning and "
                f"difficulty ({', '.join(waiting[:5])}{' ...' if len(waiting) > 5 else ''}): set "
                "their checks to pass or fail first"
            )
        elif not with_rewrites:
            reason = f"no item of the run has a checked rewrite in {self.source}"
        else:
            reason = ""
        return GateReport(
            not reason,
            reason or "every rewrite used passed its meaning and difficulty checks",
            count["usable"],
            count["rejected"],
            count["unchecked"],
            with_rewrites,
            len(item_ids),
        )


def append(path: Path | str, records: list[Paraphrase]) -> None:
    """Add ``records`` to a store file (created if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for p in records:
            f.write(p.to_json() + "\n")
