"""An Auditor over a scripted backend, with no model loaded."""

from __future__ import annotations

from pathlib import Path

from flipgate.calls import Auditor, Paths
from flipgate.config import AuditConfig
from flipgate.items import DatasetSpec

MODEL = {
    "id": "scripted",
    "backend": "scripted",
    "source": {},
    "readouts": ["letter_logprob", "regex"],
    "primary_readout": "regex",
}


def make_auditor(tmp_path: Path, backend, cache=True, run_id="r1", control_salt=None) -> Auditor:
    cfg = AuditConfig(
        tmp_path / "models.yaml",
        {"scripted": MODEL},
        items_per_dataset=5,
        facets={"option_order": [DatasetSpec("arc_challenge")]},
        controls={"same_ordering": [("option_order", DatasetSpec("arc_challenge"))]},
        bootstrap_n=200,
    )
    paths = Paths(
        tmp_path / "runs" / run_id / "trials.sqlite",
        tmp_path / "cache.sqlite" if cache else None,
        tmp_path / "manifests",
        tmp_path / "models",
    )
    auditor = Auditor(cfg, run_id, paths, progress=False, control_salt=control_salt)
    auditor._backends["scripted"] = backend
    return auditor
