"""Who is compared with whom (docs/definitions.md §11): in one run, a model with the ``baseline:``
it names in models.yaml; across runs, each candidate with its previous version in a baseline run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flipgate import FlipgateError
from flipgate.regression.runs import RunRecord


@dataclass(frozen=True)
class Pairing:
    """A candidate and its baseline: ``run`` is the baseline's run (None: this session), ``skip``
    why there is nothing to compare with."""

    candidate: str
    baseline: str | None
    run: Path | None = None
    skip: str | None = None

    @property
    def label(self) -> str:
        where = "" if self.run is None else "@baseline-run"
        return f"{self.candidate}-vs-{self.baseline or 'none'}{where}"


def baseline_in(
    record: RunRecord, candidate: str, declared: str | None
) -> tuple[str | None, str | None]:
    """(baseline model id in ``record``, None) or (None, why not): the candidate's own id (its
    previous version), else the ``baseline:`` it declares, else the run's only model."""
    models = sorted(record.models)
    for choice in (candidate, declared):
        if choice in record.models:
            return choice, None
    if len(models) == 1:
        return models[0], None
    return None, (
        f"baseline run {record.run_id} has no model {candidate!r}"
        f"{f' nor {declared!r}' if declared else ''} (models: {', '.join(models)})"
    )


def pairings(
    models: dict[str, dict],
    candidates: list[str],
    record: RunRecord | None = None,
    candidate: str | None = None,
    source: str = "models.yaml",
) -> list[Pairing]:
    """In-run pairs (every candidate with a ``baseline:``), plus, with a baseline ``record``, every
    candidate (or only ``candidate``) against its version in that run. ``models`` maps id ->
    config."""
    if candidate is not None and candidate not in candidates:
        raise FlipgateError(
            f"--candidate {candidate!r}: not a model of {source} audited by the order suites "
            f"(models: {', '.join(candidates) or 'none'})"
        )
    chosen = [candidate] if candidate else candidates
    out = [
        Pairing(m, models[m]["baseline"]) for m in chosen if models[m].get("baseline") in candidates
    ]
    if record is not None:
        for m in chosen:
            base, why = baseline_in(record, m, models[m].get("baseline"))
            out.append(Pairing(m, base, record.path, why))
    return out
