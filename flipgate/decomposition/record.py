"""What a decomposition cell records: the decomposition (or why a gate stopped it), the readouts
the model could not give, the gate reports and the manifest — read by the card, Allure and the
terminal alike."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from flipgate.metrics.decomposition import AxisDecomposition


class DecompositionRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    #: its table in the trials store (flipgate.store.StoredRecord), one row per key: the suite's
    #: name (decompositions before; a run reads only its own store's records)
    TABLE: ClassVar[str] = "decomposition"
    KEY: ClassVar[tuple[str, ...]] = ("model_id", "dataset", "axis")

    model_id: str
    dataset: str
    axis: str
    manifest_sha256: str | None = None
    decomposition: AxisDecomposition | None = None
    #: readout -> why this model gives none
    not_measured: dict[str, str] = {}
    #: gate name -> its report (``passed``, ``reason`` and counts)
    gates: dict[str, dict[str, Any]] = {}
    #: the reason a gate stopped the cell (then ``decomposition`` is None)
    stopped: str | None = None

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> DecompositionRecord:
        return cls.model_validate_json(text)
