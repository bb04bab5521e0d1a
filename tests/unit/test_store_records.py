"""The trials store keeps any suite's typed records in the table the record type names, without
naming a suite itself (flipgate.store.StoredRecord)."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

import pytest
from pydantic import BaseModel

from flipgate.store import TrialStore


class Planted(BaseModel):
    TABLE: ClassVar[str] = "planted_records"
    KEY: ClassVar[tuple[str, ...]] = ("model_id", "dataset", "part")

    model_id: str
    dataset: str
    part: str
    value: float

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> Planted:
        return cls.model_validate_json(text)


def test_records_round_trip_in_key_order_and_a_rerun_replaces(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    assert store.records(Planted) == []  # never written: no table, no records
    store.add_record(Planted(model_id="b", dataset="x", part="p", value=1.0))
    store.add_record(Planted(model_id="a", dataset="y", part="q", value=2.0))
    store.add_record(Planted(model_id="a", dataset="x", part="q", value=3.0))
    store.add_record(Planted(model_id="a", dataset="x", part="q", value=4.0))  # same key
    got = store.records(Planted)
    assert [(r.model_id, r.dataset, r.value) for r in got] == [
        ("a", "x", 4.0),
        ("a", "y", 2.0),
        ("b", "x", 1.0),
    ]
    assert [r.value for r in store.records(Planted, "b")] == [1.0]
    columns = [
        row[1]
        for row in sqlite3.connect(tmp_path / "trials.sqlite").execute(
            "PRAGMA table_info(planted_records)"
        )
    ]
    assert columns == ["model_id", "dataset", "part", "record"]


def test_a_record_type_whose_table_is_not_an_identifier_is_refused(tmp_path):
    class Bad(Planted):
        TABLE: ClassVar[str] = "x; DROP TABLE trials"

    store = TrialStore(tmp_path / "trials.sqlite")
    with pytest.raises(ValueError, match="identifiers"):
        store.add_record(Bad(model_id="a", dataset="x", part="p", value=1.0))


def test_each_suites_records_are_kept_in_a_table_of_its_name():
    """One name per suite: its records' (and analyses') table in the trials store is the suite's
    name. A run reads these tables only in its own store (its cards, Allure, the terminal);
    what reads an older run's store (compare, baseline, trend) reads trials, summaries and
    sequential stops, so the tables named otherwise before (decompositions, judge_consensus,
    envelopes) need no reading."""
    from flipgate import registry
    from flipgate.continuity.record import ContinuityRecord
    from flipgate.decomposition.record import DecompositionRecord
    from flipgate.envelope.names import ENVELOPE_ANALYSES
    from flipgate.judges.record import JudgeRecord
    from flipgate.odi.names import ODI_FITS

    tables = {
        "decomposition": (DecompositionRecord.TABLE, DecompositionRecord.KEY),
        "judges": (JudgeRecord.TABLE, JudgeRecord.KEY),
        "continuity": (ContinuityRecord.TABLE, ContinuityRecord.KEY),
        "envelope": (ENVELOPE_ANALYSES.name, (ENVELOPE_ANALYSES.key,)),
        "odi": (ODI_FITS.name, (ODI_FITS.key,)),
    }
    assert all(registry.get(suite).name == table for suite, (table, _) in tables.items())
    assert tables["decomposition"][1] == ("model_id", "dataset", "axis")
    assert tables["judges"][1] == ("model_id", "dataset")
    assert tables["continuity"][1] == ("model_id", "sweep", "estimator")


def test_analyses_round_trip_by_key_and_an_older_stores_tables_read_as_before(tmp_path):
    """A suite's analyses (the envelope's per benchmark, the ODI fit per panel) live in the table
    its AnalysisTable names: created on the first write, the same layout older stores have."""
    from flipgate.envelope.names import ENVELOPE_ANALYSES
    from flipgate.odi.names import ODI_FITS, ORDER_PANEL
    from flipgate.store import AnalysisTable

    store = TrialStore(tmp_path / "trials.sqlite")
    assert store.analysis(ENVELOPE_ANALYSES, "mmlu") is None  # never written
    store.add_analysis(ENVELOPE_ANALYSES, "mmlu", {"sdi": 0.1})
    store.add_analysis(ENVELOPE_ANALYSES, "mmlu", {"sdi": 0.2})  # a rerun replaces it
    assert store.analysis(ENVELOPE_ANALYSES, "mmlu") == {"sdi": 0.2}
    assert store.analysis(ENVELOPE_ANALYSES, "arc") is None
    # a store written before: its tables were made up front, with these columns
    old = sqlite3.connect(tmp_path / "old.sqlite")
    old.execute("CREATE TABLE odi (name TEXT PRIMARY KEY, analysis TEXT)")
    old.execute("INSERT INTO odi VALUES ('order', '{\"passed\": true}')")
    old.commit()
    assert TrialStore(tmp_path / "old.sqlite").analysis(ODI_FITS, ORDER_PANEL) == {"passed": True}
    with pytest.raises(ValueError, match="identifiers"):
        store.add_analysis(AnalysisTable("odi; --", "name"), "x", {})
