"""Which earlier run the audit compares with, and its candidate/baseline pairings
(docs/regression.md): models.yaml ``baseline:`` entries, ``--baseline PATH``, the promoted
baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flipgate import FlipgateError
from flipgate.regression.plan import pairings as make_pairings
from flipgate.regression.runs import STORE_NAME, RunRecord
from flipgate.suite.api import SuiteContext

#: a regression threshold's selector: ``vs: baseline`` compares a candidate's cell with its
#: baseline's
VS = "baseline"


def pairings(ctx: SuiteContext, cfg: Any = None) -> list:
    """Candidate/baseline pairs (flipgate.regression.plan.Pairing; docs/regression.md):
    models.yaml ``baseline:`` entries, and with ``--baseline PATH`` every order-suite model (or
    ``--candidate``) against that run; read once per process. ``cfg``: models.yaml when it is
    asked for before the run's checks (``RegressionSuite.configure``)."""
    return ctx.memo("regression-pairings", lambda: _pairings(ctx, cfg or ctx.audit_config()))


def _pairings(ctx: SuiteContext, cfg: Any) -> list:
    where, candidate = baseline_run(ctx), ctx.option("--candidate")
    if candidate is not None and where is None:
        raise FlipgateError(
            f"option --candidate {candidate!r}: names the model to compare with --baseline "
            f"PATH, which is not given (and there is no promoted baseline)"
        )
    record = None
    if where is not None:
        record = RunRecord.open(where)
        record.check_grammar(cfg.seed)
    return make_pairings(cfg.models, cfg.audited("order"), record, candidate, str(cfg.path))


#: ``--baseline none``: compare with no earlier run, not even the promoted baseline
NO_BASELINE = "none"
#: the folder beside the runs folder (``--runs-dir``, reports/runs) where ``flipgate baseline``
#: promotes a run (reports/baseline)
PROMOTED_DIR = "baseline"


def baseline_run(ctx: SuiteContext) -> Path | None:
    """The run the audit compares with: ``--baseline PATH`` (relative to where pytest was
    started), else the promoted baseline beside the runs folder when it holds a trials store
    (``flipgate baseline`` put it there; a bare ``pytest`` then compares with the last release),
    else none; ``--baseline none`` turns the comparison with an earlier run off."""
    path = ctx.option("--baseline")
    if path == NO_BASELINE:
        return None
    if path is not None:
        where = Path(path)
        return where if where.is_absolute() else ctx.invocation_dir / where
    promoted = ctx.path("--runs-dir").parent / PROMOTED_DIR
    return promoted if (promoted / STORE_NAME).is_file() else None


def compared_cells(cfg, pairing) -> list[tuple[str, str]]:
    """The candidate's cells; in one run only those its baseline is audited on too."""
    mine = cfg.cells(pairing.candidate)
    return (
        mine if pairing.run is not None else [c for c in mine if c in cfg.cells(pairing.baseline)]
    )
