"""The judge consensus suite's settings: ``audit.judges`` of models.yaml
(docs/suites/judges.md), described by schema.json beside this module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flipgate import FlipgateError
from flipgate.items.registry import DatasetSpec
from flipgate.metrics.consensus import ConsensusSettings

if TYPE_CHECKING:
    from flipgate.config import AuditConfig


@dataclass(frozen=True)
class JudgePlan:
    """``audit.judges`` (docs/definitions.md §9): candidate-set datasets, the judge's readout
    (None: ``label_logprob`` for local models, ``listwise`` for API models), items per dataset
    and the consensus settings."""

    datasets: tuple[DatasetSpec, ...]
    readout: str | None
    n_items: int
    consensus: ConsensusSettings = ConsensusSettings()

    @classmethod
    def parse(cls, spec: dict, where: str, config: AuditConfig) -> JudgePlan:
        """``audit.judges`` (valid against its schema.json); ``where`` names the file and
        field."""
        return cls(
            tuple(
                DatasetSpec.parse(d, f"{where}.datasets[{j}]")
                for j, d in enumerate(spec["datasets"])
            ),
            spec.get("readout"),
            int(spec.get("items_per_dataset", config.items_per_dataset)),
            ConsensusSettings.parse(spec, where, config.k),
        )

    def dataset(self, name: str) -> DatasetSpec:
        for spec in self.datasets:
            if spec.name == name:
                return spec
        raise FlipgateError(f"dataset {name!r} is not declared under audit.judges")

    def readout_for(self, model: dict) -> str:
        return self.readout or ("listwise" if model["backend"] == "litellm" else "label_logprob")
