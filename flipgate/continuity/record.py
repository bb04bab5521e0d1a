"""What a continuity cell records: the model, sweep and estimator, how the samples were drawn,
the manifest and every number — read by the card, Allure and the terminal alike."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from flipgate.metrics.continuity import ContinuityResult


class ContinuityRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    #: its table in the trials store (flipgate.store.StoredRecord), one row per key
    TABLE: ClassVar[str] = "continuity"
    KEY: ClassVar[tuple[str, ...]] = ("model_id", "sweep", "estimator")

    model_id: str
    sweep: str
    estimator: str
    #: sampled answers per estimate (DSE's N; FESTA's N per side); None for logprob
    samples: int | None
    temperature: float | None
    top_p: float | None
    manifest_sha256: str | None = None
    result: ContinuityResult

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> ContinuityRecord:
        return cls.model_validate_json(text)
