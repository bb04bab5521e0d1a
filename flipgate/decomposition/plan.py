"""The readout decomposition suite's settings: ``audit.decomposition`` of models.yaml
(docs/suites/decomposition.md), described by schema.json beside this module."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flipgate import FlipgateError
from flipgate.axes import AXIS_NAMES
from flipgate.items.registry import DatasetSpec

if TYPE_CHECKING:
    from flipgate.config import AuditConfig

#: the readouts decomposed when ``readouts`` is not given (judge: opt-in, it makes its own calls)
READOUTS = ("regex", "letter_logprob", "cloze")


@dataclass(frozen=True)
class DecompositionPlan:
    """``audit.decomposition`` (docs/definitions.md §8): datasets, axes, readouts (the reference
    ``regex`` first), items per dataset and the paraphrase store's folder."""

    datasets: tuple[DatasetSpec, ...]
    axes: tuple[str, ...]
    readouts: tuple[str, ...]
    n_items: int
    paraphrases: Path
    #: the judge readout's judge (None: ``audit.judge``, else the audited model) and its gate
    judge_model: str | None = None
    min_agreement: float = 0.9
    min_swap_consistency: float = 0.9
    agreement_set: Path = Path("fixtures/judge/agreement.jsonl")

    @classmethod
    def parse(cls, spec: dict, where: str, config: AuditConfig) -> DecompositionPlan:
        """``audit.decomposition`` (valid against its schema.json); ``where`` names the file
        and field, relative paths resolve against models.yaml's folder."""
        path = config.path
        judge = spec.get("judge") or {}
        judge_model = judge.get("model")
        if judge_model is not None and judge_model not in config.models:
            raise FlipgateError(
                f"{where}.judge.model: no model with this id (value: {judge_model!r}); "
                f"models: {', '.join(config.models)}"
            )
        if judge_model is not None:
            config.suite_judges.add(judge_model)  # it judges, so it needs no cell of its own
        datasets = tuple(
            DatasetSpec.parse(d, f"{where}.datasets[{j}]") for j, d in enumerate(spec["datasets"])
        )
        readouts = ["regex"] + [r for r in spec.get("readouts", READOUTS) if r != "regex"]
        return cls(
            datasets,
            tuple(spec.get("axes", AXIS_NAMES)),
            tuple(readouts),
            int(spec.get("items_per_dataset", config.items_per_dataset)),
            (path.parent / spec.get("paraphrases", "fixtures/paraphrases")).resolve(),
            judge.get("model"),
            float(judge.get("min_agreement", 0.9)),
            float(judge.get("min_swap_consistency", 0.9)),
            (path.parent / judge.get("agreement_set", "fixtures/judge/agreement.jsonl")).resolve(),
        )

    def dataset(self, name: str) -> DatasetSpec:
        for spec in self.datasets:
            if spec.name == name:
                return spec
        raise FlipgateError(f"dataset {name!r} is not declared under audit.decomposition")
