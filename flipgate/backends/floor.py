"""A same-ordering control's noise floor: measured, or 0 by construction (docs/definitions.md
§3.6, §12.5).

The control asks the canonical ordering K times, each replicate with its own seed, to measure how
often a model changes its answer when nothing changed. A backend that answers the K replicates as
copies of one computation (:attr:`flipgate.backends.base.Backend.measures_replicates` False: the
transformers backend under greedy decoding with shared prefixes) has measured nothing: its flip
rate is 0 by construction. Such a control keeps its summaries, labelled with
:data:`NOT_MEASURED_FLOOR`, and its thresholds are not applicable (never a pass); Δ_order is then
the facet's flip rate against that constructed floor.
"""

from __future__ import annotations

from flipgate.backends.base import Backend, measures_replicates

#: the label a control's summaries (and the card's control block) carry when its floor was not
#: measured
NOT_MEASURED_FLOOR = "0 by construction (not measured)"

#: how each backend that copies answers does it, as the not-applicable message names it
COPYING_BACKENDS = {"hf": "transformers, greedy with shared prefixes"}


def floor_not_measured(model_id: str, backend: Backend) -> str | None:
    """Why ``model_id``'s same-ordering controls measure no floor (its backend answers their
    replicates as copies of one computation), or None when they measure one."""
    if measures_replicates(backend):
        return None
    kind = str(backend.settings.get("backend", "?"))
    how = COPYING_BACKENDS.get(kind, kind)
    return (
        f"floor 0 by construction — not measured: {model_id}'s backend ({how}) answers the K "
        "replicates as copies of one computation; serve the model or sample "
        "(docs/suites/order.md)"
    )
