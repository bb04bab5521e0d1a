"""What a judge consensus cell records: the judge, its readout, the manifest, every number, and
why runs did not parse — read by the card, Allure and the terminal alike."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from flipgate.metrics.judging import JudgeConsensusResult


class JudgeRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    #: its table in the trials store (flipgate.store.StoredRecord), one row per key: the suite's
    #: name (judge_consensus before; a run reads only its own store's records)
    TABLE: ClassVar[str] = "judges"
    KEY: ClassVar[tuple[str, ...]] = ("model_id", "dataset")

    model_id: str
    dataset: str
    readout: str
    manifest_sha256: str | None = None
    result: JudgeConsensusResult
    #: parse-failure reason -> runs that failed with it
    parse_failures: dict[str, int] = {}

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> JudgeRecord:
        return cls.model_validate_json(text)
