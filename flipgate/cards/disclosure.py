"""How a run discloses its sequential gates (docs/definitions.md §12.6), alike on the card, in
Allure and on the terminal: each sequential cell's stop (N used / cap, the stopping batch, what
decided and by which test, the model calls used and saved; the card's ``sequential`` section), a
verdict's confidence sequence and, labelled apart, the fixed-N bootstrap CI of the same metric on
the same items — both shown for reading, neither deciding — and the run's calls saved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from flipgate.cards.model import SequentialCell, SequentialThreshold
from flipgate.gate.sequential import SequentialStop

#: how a verdict's confidence sequence is labelled
SEQUENCE_LABEL = "confidence sequence (anytime-valid, shown)"
#: how the cell's fixed-N bootstrap CI of the same metric is labelled next to it
BOOTSTRAP_LABEL = "bootstrap CI (fixed-N, same items, shown)"


def card_section(stop: SequentialStop, bootstrap_level: float | None) -> SequentialCell:
    """A sequential cell's entry in the card's ``sequential`` section; ``bootstrap_level``: the
    level of the cell's bootstrap CIs (the run's)."""
    return SequentialCell(
        cap=stop.cap,
        cap_from=stop.cap_from,
        n_items=stop.n_items,
        min_items=stop.min_items,
        batch_items=stop.batch_items,
        batches=stop.batches,
        reason=stop.reason,
        decided_by=stop.decided_by,
        calls_used=stop.calls_used,
        calls_saved=stop.calls_saved,
        bootstrap_level=bootstrap_level,
        thresholds=[
            SequentialThreshold.model_validate(
                t.model_dump(include=set(SequentialThreshold.model_fields))
            )
            for t in stop.thresholds
        ],
    )


def interval_text(ci: Sequence[float | None] | None, level: float | None) -> str:
    """``95% [0.100, 0.200]``: an interval with the level it was computed at (where known), or –
    where there is none."""
    if not ci or ci[0] is None or ci[1] is None:
        return "–"
    at = f"{level:.0%} " if level else ""
    return f"{at}[{ci[0]:.3f}, {ci[1]:.3f}]"


def labelled_intervals(
    sequence: Sequence[float | None] | None,
    level: float | None,
    bootstrap: Sequence[float | None] | None,
    bootstrap_level: float | None,
) -> str:
    """A verdict's confidence sequence and, labelled apart, the fixed-N bootstrap CI of its metric
    on the same items."""
    return (
        f"{SEQUENCE_LABEL} {interval_text(sequence, level)}; "
        f"{BOOTSTRAP_LABEL} {interval_text(bootstrap, bootstrap_level)}"
    )


def stop_line(cell: str, stop: SequentialCell, esc: Callable[[str], str] = str) -> str:
    """``option_order: 24/40 items used, stopping batch 3 (8 items a batch, from 16); decided by
    flip_rate <= 0.25 (lower); 96 model calls saved (144 used)``; ``esc`` escapes the names (the
    cell's, the thresholds') for Markdown."""
    tests = {t.threshold: t.test for t in stop.thresholds if t.test}
    open_ = [esc(t.threshold) for t in stop.thresholds if t.holds and t.decision is None]
    if stop.reason == "decided":
        why = "decided by " + ", ".join(
            esc(name) + (f" ({esc(tests[name])})" if name in tests else "")
            for name in stop.decided_by
        )
    elif stop.reason == "cap":
        why = "at the cap, " + (
            f"undecided: {', '.join(open_)}" if open_ else "every threshold decided there"
        )
    elif stop.reason == "undecidable":
        notes = {t.threshold: t.note for t in stop.thresholds if t.futile and t.note}
        why = "stopped undecided (futility): " + ", ".join(
            esc(t.threshold) + (f" ({esc(notes[t.threshold])})" if t.threshold in notes else "")
            for t in stop.thresholds
            if t.holds and t.decision is None
        )
    else:
        why = "at the cap: no threshold its one-sided tests decide"
    of = f" (the cap: the items {esc(stop.cap_from)} used)" if stop.cap_from else ""
    return (
        f"{esc(cell)}: {stop.n_items}/{stop.cap} items used{of}, stopping batch {stop.batches} "
        f"({stop.batch_items} items a batch, from {stop.min_items}); {why}; "
        f"{stop.calls_saved} model calls saved ({stop.calls_used} used)"
    )


def run_line(stops: Sequence[SequentialStop]) -> str | None:
    """The run's sequential gates in one terminal line (None when no cell was sequential): how
    many cells stopped before their cap and the model calls that saved of those the caps would
    have taken."""
    if not stops:
        return None
    early = sum(s.n_items < s.cap for s in stops)
    saved = sum(s.calls_saved for s in stops)
    cap = sum(s.cap * s.calls_per_item for s in stops)
    return (
        f"flipgate: sequential gates: {early} of {len(stops)} cells stopped before their cap, "
        f"{saved} model calls saved (cap: {cap})"
    )
