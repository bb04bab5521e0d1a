"""The continuity suite's settings: ``audit.continuity`` of models.yaml
(docs/suites/continuity.md), described by schema.json beside this module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flipgate import FlipgateError
from flipgate.continuity.estimators import ESTIMATORS
from flipgate.continuity.sweeps import SWEEPS

if TYPE_CHECKING:
    from flipgate.config import AuditConfig


@dataclass(frozen=True)
class ContinuityPlan:
    """``audit.continuity`` (docs/definitions.md §10): the sweeps, sources per sweep, the
    uncertainty estimators, samples per estimate and how they are drawn."""

    sweeps: tuple[str, ...]
    estimators: tuple[str, ...]
    n_sources: int = 4
    samples: int = 10
    temperature: float = 1.0
    top_p: float = 0.95
    n_equivalent: int = 2
    n_complementary: int = 2
    max_new_tokens: int = 3

    @classmethod
    def parse(cls, spec: dict, where: str, config: AuditConfig) -> ContinuityPlan:
        """``audit.continuity`` (valid against its schema.json); ``where`` names the file and
        field."""
        for key, known in (("sweeps", SWEEPS), ("estimators", ESTIMATORS)):
            for j, name in enumerate(spec.get(key) or ()):
                if name not in known:
                    raise FlipgateError(
                        f"{where}.{key}[{j}]: unknown (value: {name!r}); known: {', '.join(known)}"
                    )
        plan = cls(
            tuple(spec["sweeps"]),
            tuple(spec.get("estimators") or ESTIMATORS),
            int(spec.get("sources", 4)),
            int(spec.get("samples", 10)),
            float(spec.get("temperature", 1.0)),
            float(spec.get("top_p", 0.95)),
            int(spec.get("equivalent", 2)),
            int(spec.get("complementary", 2)),
            int(spec.get("max_new_tokens", 3)),
        )
        for name, value in (
            ("equivalent", plan.n_equivalent),
            ("complementary", plan.n_complementary),
        ):
            if plan.samples % value:
                raise FlipgateError(
                    f"{where}.{name}: samples ({plan.samples}) must split evenly over the "
                    f"{name} inputs (value: {value})"
                )
        return plan
