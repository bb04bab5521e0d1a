"""Decomposition thresholds (``facet: decomposition``, docs/definitions.md §5, §8, §12).

``genuine_flip_rate`` is decided under the reference readout; ``artifact``, ``artifact_share``,
``flip_rate`` and ``parse_rate`` under every other readout (or the one a ``readout:`` selector
names). ``<metric>@<axis>`` gates one axis only.

A ``lower``/``upper`` threshold on an item mean (``flip_rate``, ``genuine_flip_rate``,
``artifact``, ``parse_rate``) is decided by the two one-sided tests of §12.1 on its per-item
values at fixed N (the cell draws all its items at once: no look before the end);
``artifact_share``, a ratio of counts, keeps the §5 bootstrap-CI rule."""

from __future__ import annotations

from flipgate.config import ThresholdSet
from flipgate.decomposition.names import DECOMPOSITION_CELL
from flipgate.gate.rules import evaluate
from flipgate.metrics.decomposition import AxisDecomposition, decomposition_item_values
from flipgate.results import Verdict


def gate(result: AxisDecomposition, ts: ThresholdSet, dataset: str) -> list[Verdict]:
    verdicts = []
    for t in ts.for_cell(DECOMPOSITION_CELL, dataset):
        base, _, axis = t.metric.partition("@")
        if axis not in ("", result.axis):
            continue
        if base == "genuine_flip_rate":
            readouts = [result.reference]
        elif t.readout is not None:
            readouts = [t.readout]
        else:
            readouts = [r for r in result.readouts if r != result.reference] or [result.reference]
        for readout in readouts:
            block = result.metrics(readout) if readout in result.readouts else {}
            found = {t.metric: block[base]} if base in block else {}
            values = decomposition_item_values(result, readout).get(base)
            verdicts += evaluate(
                [t],
                {readout: found},
                readout,
                ts.on_inconclusive,
                sequences=None if values is None else {(readout, t.metric): values},
                facet=f"{DECOMPOSITION_CELL}[{result.axis}]",
            )
    return verdicts
