"""The configuration envelope suite (docs/definitions.md §7): one cell per benchmark of the
envelope file (``--envelope``) over its roster."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from flipgate import FlipgateError
from flipgate.envelope.names import ENVELOPE_CELL
from flipgate.suite.api import (
    READS_ORDER_CELLS,
    Case,
    GatedCell,
    MetricSpec,
    NoCases,
    Plan,
    SuiteContext,
)
from flipgate.suite.builtin import TypedCardSection

ENVELOPE_METRICS = (
    MetricSpec("sdi", 0.0, math.inf),
    MetricSpec("cfr", 0.0, 1.0, at="number", at_name="θ"),  # cfr@θ, e.g. cfr@0.5
    MetricSpec("score_min", 0.0, 1.0),
    MetricSpec("score_mean", 0.0, 1.0),
    MetricSpec("score_max", 0.0, 1.0),
    MetricSpec("rho_flip_max", 0.0, 1.0),
    MetricSpec("strict_disagreement_max", 0.0, 1.0),
    MetricSpec("tau_r", -1.0, 1.0),
    MetricSpec("total_order_mismatch", 0.0, 1.0),
    MetricSpec("orderings_reached", 1.0, math.inf),
)


def envelope(ctx: SuiteContext, models: list[str] | None = None):
    """The envelope file (``--envelope``), parsed once per process; ``models``: the ids of
    models.yaml, when it is asked for while models.yaml is being checked."""
    from flipgate.envelope.spec import load_envelope

    ids = models if models is not None else list(ctx.audit_config().models)
    return ctx.memo("envelope", lambda: load_envelope(envelope_file(ctx), ids))


#: the package whose ``envelopes/`` folder holds the envelope files flipgate ships
SHIPPED_IN = "flipgate_suites.envelope"


def envelope_file(ctx: SuiteContext) -> Path:
    """``--envelope``: a YAML file (relative to the project), or the name of an envelope flipgate
    ships (``default`` when not given), read from the installed suites."""
    value = ctx.option("--envelope")
    if value is not None and ("/" in value or value.endswith((".yaml", ".yml"))):
        return ctx.path("--envelope")
    return shipped_envelope(value or "default")


def shipped_envelope(name: str) -> Path:
    from importlib.resources import files

    folder = Path(str(files(SHIPPED_IN))) / "envelopes"
    path = folder / f"{name}.yaml"
    if not path.is_file():
        shipped = sorted(p.stem for p in folder.glob("*.yaml"))
        raise FlipgateError(
            f"option --envelope {name!r}: not a YAML file path, nor an envelope flipgate ships "
            f"({', '.join(shipped)})"
        )
    return path


def roster(ctx: SuiteContext) -> list[str]:
    return envelope(ctx).roster or ctx.audit_config().audited("envelope")


class EnvelopeSuite(TypedCardSection):
    name = "envelope"
    config_key = None  # its own file, --envelope (flipgate/config_schemas/envelope.schema.json)
    schema = None
    facet = ENVELOPE_CELL
    metrics = ENVELOPE_METRICS
    piloted = False

    def parse(self, spec: dict, where: str, config) -> Any:
        return None

    def cases(self, ctx: SuiteContext, part: str | None) -> list[Case] | NoCases:
        if not roster(ctx):
            return NoCases(
                "no-roster", f"no model in {ctx.option('--models')} lists suite 'envelope'"
            )
        # one group per benchmark: the benchmarks of an envelope run on separate workers; large
        # independent work, scheduled between the order cells and ODI (flipgate.suite.api)
        return [
            Case(
                spec,
                spec.name,
                f"envelope-{spec.name}",
                dataset=spec.name,
                rank=READS_ORDER_CELLS - 1,
            )
            for spec in envelope(ctx).benchmarks
        ]

    def gated(self, ctx: SuiteContext) -> list[GatedCell]:
        """Each benchmark of the envelope file for each model of its roster; none when the file
        cannot be read (the suite reports that itself when it is collected)."""
        cfg = ctx.audit_config()
        try:
            spec = envelope(ctx, list(cfg.models))
        except FlipgateError:
            return []
        models = spec.roster or cfg.audited("envelope")
        return [GatedCell(m, ENVELOPE_CELL, b.name) for m in models for b in spec.benchmarks]

    def cell(self, ctx: SuiteContext, param: Any, auditor, capture_manager: Any):
        from flipgate.envelope.cell import EnvelopeCell

        return EnvelopeCell(auditor, ctx.thresholds_dir, envelope(ctx), param, capture_manager)

    def planned(self, ctx: SuiteContext, param: Any) -> Plan:
        from flipgate.envelope.run import planned_trials

        cfg = ctx.audit_config()
        models = {m: cfg.models[m] for m in roster(ctx) if m in cfg.models}
        return planned_trials(envelope(ctx), param, models)

    def project(self, ctx: SuiteContext, auditor, ledger) -> list:
        from flipgate.envelope.cost import project_envelope

        try:
            if not envelope_file(ctx).exists():
                return []
        except FlipgateError:
            return []
        return [project_envelope(auditor, envelope(ctx), m) for m in roster(ctx)]

    # -- its GRID card (flipgate.cards.build.TypedCardSuite)
    card_module = "flipgate.envelope.card"
    #: an envelope-only benchmark's card comes first (the other suites' own cards are of datasets
    #: the envelope did not measure the model on)
    own_card_rank = 0


SUITE = EnvelopeSuite()
