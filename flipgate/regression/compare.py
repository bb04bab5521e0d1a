"""Paired comparison of a candidate model version against its baseline on one cell
(docs/definitions.md §11).

Both versions answered the same manifest (same items, same orderings), so every delta is paired per
item: ``delta_flip_rate`` (items parsed ≥ 2 times in both), ``delta_accuracy`` (canonical ordering;
an unparsed answer counts as wrong), ``delta_parse_rate`` and, for a control cell,
``delta_delta_order`` (per item flip_perm − flip_same). Each has a paired percentile bootstrap over
items; the binary ones an exact McNemar test on their discordant items. A delta is candidate −
baseline, so a positive ``delta_flip_rate`` and a negative ``delta_accuracy`` are regressions.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd

from flipgate import FlipgateError
from flipgate import metrics as M
from flipgate.cell import CellKey
from flipgate.metrics.sequential import ItemValues, ValueKind
from flipgate.results import MetricEstimate, Verdict
from flipgate.summary import answers_frame

#: the gated deltas; higher_is_worse says which sign is a regression
DELTA_METRICS = {
    "delta_flip_rate": True,
    "delta_accuracy": False,
    "delta_parse_rate": False,
    "delta_delta_order": True,
}
#: deltas of two binary per-item values: each item's difference is in {−1, 0, 1}
PAIRED_BINARY = frozenset({"delta_flip_rate", "delta_accuracy"})


class IncomparableCell(FlipgateError):
    """The two versions' cells differ in manifest, items or readouts."""


@dataclass
class Arm:
    """One version's side of a cell: its trials, the manifest they follow and its readouts; for a
    control cell also the trials of the permuted facet (for Δ_order)."""

    model_id: str
    trials: pd.DataFrame
    readouts: tuple[str, ...]
    manifest_sha256: str | None = None
    perm: pd.DataFrame | None = None
    #: the cell drew its items sequentially (docs/definitions.md §12): its trials are a prefix of
    #: the seeded item order, compared with the other version's on the prefix both drew
    sequential: bool = False


@dataclass
class Overlap:
    """What each version measured and what the comparison used (disclosed with
    ``--baseline-partial``)."""

    baseline_items: int
    candidate_items: int
    shared_items: int
    baseline_pairs: int
    candidate_pairs: int
    shared_pairs: int
    partial: bool = False
    #: a sequential cell: the versions are compared on the items both drew (the shorter prefix
    #: of the seeded order, docs/definitions.md §12)
    prefix: bool = False

    @property
    def complete(self) -> bool:
        return self.baseline_pairs == self.candidate_pairs == self.shared_pairs


@dataclass
class ReadoutDeltas:
    """The deltas of one readout: ``deltas`` is what the gate reads (estimates, CIs, bootstrap
    draws)."""

    readout: str
    deltas: dict[str, MetricEstimate]
    arms: dict[str, dict[str, float]]
    mcnemar: dict[str, M.McNemar]
    items: dict[str, list[str]]
    #: per metric the paired per-item values
    #: ``{"items": [ids], "baseline": [...], "candidate": [...]}``
    per_item: dict[str, dict[str, list]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "readout": self.readout,
            "deltas": {m: e.model_dump(mode="json") for m, e in self.deltas.items()},
            "arms": self.arms,
            "mcnemar": {k: v.to_dict() for k, v in self.mcnemar.items()},
            "items": self.items,
            "per_item": self.per_item,
        }


@dataclass
class CellComparison:
    """Candidate vs baseline on one (facet or control, dataset) cell, per readout."""

    candidate: str
    baseline: str
    cell: str
    dataset: str
    primary_readout: str
    readouts: dict[str, ReadoutDeltas]
    overlap: Overlap
    baseline_identity: dict = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    #: the compared items in the order they were drawn (the candidate's seeded order)
    drawn: list[str] = field(default_factory=list)
    #: the pairs a sequential candidate's case is tested on (flipgate.regression.hold): its
    #: fixed-N tests wait for them; None: the pairs there are
    planned: int | None = None

    @property
    def primary(self) -> ReadoutDeltas:
        return self.readouts[self.primary_readout]

    def estimates(self) -> dict[str, dict[str, MetricEstimate]]:
        """``{readout: {metric: estimate}}`` as :func:`flipgate.gate.rules.evaluate` takes it."""
        return {r: d.deltas for r, d in self.readouts.items()}

    def sequences(self) -> dict[tuple[str, str], ItemValues]:
        """The paired per-item differences candidate − baseline in the order the items were
        drawn, on which the gate's one-sided tests decide (docs/definitions.md §12): a
        difference of two binary values (flips, canonical correctness) is ``paired``, in
        {−1, 0, 1}; a difference of parse rates lies in [−1, 1] and of Δ_order in [−2, 2]."""
        out = {}
        for r, deltas in self.readouts.items():
            for metric, paired in deltas.per_item.items():
                delta = {
                    item: b - a
                    for item, a, b in zip(paired["items"], paired["baseline"], paired["candidate"])
                }
                # every compared item in drawn order; NaN where it could not be scored in both
                drawn = self.drawn or list(delta)
                span = 2.0 if metric == "delta_delta_order" else 1.0
                kind: ValueKind = "paired" if metric in PAIRED_BINARY else "bounded"
                values = [delta.get(item, float("nan")) for item in drawn]
                out[r, metric] = ItemValues.of(values, -span, span, kind)
        return out

    def to_dict(self) -> dict:
        return json.loads(
            json.dumps(
                {
                    "candidate": self.candidate,
                    "baseline": self.baseline,
                    "cell": self.cell,
                    "dataset": self.dataset,
                    "primary_readout": self.primary_readout,
                    "overlap": {  # ``prefix`` only where it is one (fixed-N cards unchanged)
                        k: v for k, v in asdict(self.overlap).items() if k != "prefix" or v
                    },
                    "baseline_identity": self.baseline_identity,
                    "verdicts": [v.model_dump(mode="json") for v in self.verdicts],
                    "readouts": {r: d.to_dict() for r, d in self.readouts.items()},
                },
                default=_plain,
            )
        )


def _plain(x):
    if isinstance(x, (np.integer, np.floating)):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def _pairs(trials: pd.DataFrame) -> set[tuple]:
    """(item, ordering index, permutation, sample) of every trial."""
    return {
        (i, int(c), tuple(p), int(s))
        for i, c, p, s in zip(
            trials["item_id"], trials["condition"], trials["permutation"], trials["sample"]
        )
    }


def _restrict(trials: pd.DataFrame, keep: set[tuple]) -> pd.DataFrame:
    mask = [
        (i, int(c), tuple(p), int(s)) in keep
        for i, c, p, s in zip(
            trials["item_id"], trials["condition"], trials["permutation"], trials["sample"]
        )
    ]
    return trials[np.asarray(mask, dtype=bool)] if len(trials) else trials


def _k(trials: pd.DataFrame) -> int:
    return int(trials.groupby("item_id").size().max()) if len(trials) else 0


def _whole_items(pa: set[tuple], pb: set[tuple], items: set) -> set:
    """The ``items`` both arms answered under the same (ordering, sample) pairs."""
    by_item: dict[object, list[set[tuple]]] = defaultdict(lambda: [set(), set()])
    for side, pairs in enumerate((pa, pb)):
        for p in pairs:
            if p[0] in items:
                by_item[p[0]][side].add(p)
    return {i for i, (a, b) in by_item.items() if a == b}


def _match(
    base: pd.DataFrame,
    cand: pd.DataFrame,
    base_sha: str | None,
    cand_sha: str | None,
    what: str,
    partial: bool,
    prefix: bool = False,
    unfinished: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame, Overlap]:
    """Both arms on their shared (item, ordering) pairs, or an IncomparableCell naming what
    differs. With ``prefix`` (a sequential cell) the arms may have drawn different numbers of
    items: they are compared on the items both drew when those items' orderings agree. With
    ``unfinished`` (a run that stopped before its end is on one side) the arms of one manifest
    are compared on the items both answered in full."""
    pa, pb = _pairs(base), _pairs(cand)
    shared = pa & pb
    items_a, items_b = set(base["item_id"]), set(cand["item_id"])
    overlap = Overlap(
        len(items_a),
        len(items_b),
        len({p[0] for p in shared}),
        len(pa),
        len(pb),
        len(shared),
        partial,
        prefix,
    )
    same_manifest = base_sha is None or cand_sha is None or base_sha == cand_sha
    if same_manifest and overlap.complete:
        return base, cand, overlap
    both = items_a & items_b
    whole = _whole_items(pa, pb, both)
    if both and ((prefix and whole == both) or (unfinished and same_manifest and whole)):
        keep = {p for p in shared if p[0] in whole}
        overlap = replace(overlap, shared_items=len(whole), shared_pairs=len(keep))
        return _restrict(base, keep), _restrict(cand, keep), overlap
    if not partial:
        diffs = []
        if not same_manifest:
            diffs.append(f"manifest sha256 {str(base_sha)[:12]} vs {str(cand_sha)[:12]}")
        if items_a != items_b:
            diffs.append(f"items {len(items_a)} vs {len(items_b)} ({overlap.shared_items} shared)")
        if _k(base) != _k(cand):
            diffs.append(f"K {_k(base)} vs {_k(cand)}")
        if items_a == items_b and pa != pb:
            diffs.append(f"orderings differ on {len(pa ^ pb)} (item, ordering) pairs")
        raise IncomparableCell(
            f"{what}: baseline and candidate did not answer the same manifest "
            f"({'; '.join(diffs) or 'trials differ'}); "
            "re-run with the same items_per_dataset, K and seed, or pass --baseline-partial to "
            "compare the "
            f"{overlap.shared_pairs} shared (item, ordering) pairs"
        )
    if not shared:
        raise IncomparableCell(
            f"{what}: baseline and candidate share no (item, ordering) pair; nothing to compare"
        )
    return _restrict(base, shared), _restrict(cand, shared), overlap


def _per_item(trials: pd.DataFrame, readout: str) -> pd.DataFrame:
    """Per item: any_flip (docs/definitions.md §3; NaN when < 2 parsed), parse rate, and
    canonical-ordering correctness (ordering 0, first sample; an unparsed answer counts as
    wrong)."""
    df = answers_frame(trials, readout)
    answers = df["answer"].map(
        lambda a: None if a is None or a != a else json.dumps(a, sort_keys=True)
    )
    grouped = answers.groupby(df["item_id"], sort=True)
    parsed, distinct = grouped.count(), grouped.nunique()
    canon = (
        df[df["condition"] == 0]
        .sort_values("sample")
        .drop_duplicates("item_id")
        .set_index("item_id")
    )
    correct = (
        canon["correct"].map(lambda c: float(c is True or c == 1)).reindex(parsed.index).fillna(0.0)
    )
    return pd.DataFrame(
        {
            "flip": (distinct > 1).astype(float).where(parsed >= 2),
            "parse": parsed / grouped.size(),
            "correct": correct,
        }
    )


class _Builder:
    """Accumulates one readout's paired deltas."""

    def __init__(self, readout: str, n_boot: int, level: float, seed: int):
        self.readout, self.n_boot, self.level, self.seed = readout, n_boot, level, seed
        self.deltas: dict[str, MetricEstimate] = {}
        self.arms: dict[str, dict[str, float]] = {}
        self.tests: dict[str, M.McNemar] = {}
        self.per_item: dict[str, dict] = {}

    def add(
        self, metric: str, base: pd.Series, cand: pd.Series, binary: bool = False
    ) -> pd.DataFrame:
        joined = pd.DataFrame({"a": base, "b": cand}).dropna()
        a, b = joined["a"].to_numpy(float), joined["b"].to_numpy(float)
        estimate = float(b.mean() - a.mean()) if len(a) else float("nan")
        self.deltas[metric] = MetricEstimate.from_draws(
            estimate,
            M.paired_bootstrap_draws(b, a, self.n_boot, self.seed),
            self.level,
            n_items=int(len(a)),
        )
        self.arms[metric] = {
            "baseline": float(a.mean()) if len(a) else float("nan"),
            "candidate": float(b.mean()) if len(b) else float("nan"),
        }
        self.per_item[metric] = {
            "items": [str(i) for i in joined.index],
            "baseline": a.tolist(),
            "candidate": b.tolist(),
        }
        if binary:
            worse = (b > a) if DELTA_METRICS[metric] else (b < a)
            better = (b < a) if DELTA_METRICS[metric] else (b > a)
            self.tests[metric] = M.mcnemar(int(worse.sum()), int(better.sum()))
        return joined

    def build(self, items: dict[str, list[str]]) -> ReadoutDeltas:
        return ReadoutDeltas(self.readout, self.deltas, self.arms, self.tests, items, self.per_item)


def _ids(joined: pd.DataFrame, mask) -> list[str]:
    return sorted(map(str, joined.index[np.asarray(mask, dtype=bool)]))


def compare_cell(
    baseline: Arm,
    candidate: Arm,
    cell: str,
    dataset: str,
    primary: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
    partial: bool = False,
    unfinished: bool = False,
) -> CellComparison:
    """The docs/definitions.md §11 comparison of ``candidate`` against ``baseline`` on one cell;
    ``unfinished``: a side's run stopped before its end, so the cell is compared on the items both
    answered in full (:func:`_match`)."""
    what = f"{candidate.model_id} vs {baseline.model_id} on {cell} × {dataset}"
    if primary not in baseline.readouts:
        raise IncomparableCell(
            f"{what}: readout {primary!r} (the candidate's primary) is not among the baseline's "
            f"readouts ({', '.join(baseline.readouts) or 'none'})"
        )
    prefix = baseline.sequential or candidate.sequential
    base, cand, overlap = _match(
        baseline.trials,
        candidate.trials,
        baseline.manifest_sha256,
        candidate.manifest_sha256,
        what,
        partial,
        prefix,
        unfinished,
    )
    control = CellKey.parse(cell).is_control
    if control:
        if baseline.perm is None or candidate.perm is None:
            raise IncomparableCell(
                f"{what}: Δ_order needs the permuted facet's trials of both versions"
            )
        base_perm, cand_perm, _ = _match(
            baseline.perm,
            candidate.perm,
            None,
            None,
            f"{what} (its permuted facet)",
            partial,
            prefix,
            unfinished,
        )
    readouts = [r for r in candidate.readouts if r in baseline.readouts]
    out = {}
    for r in readouts:
        a, b = _per_item(base, r), _per_item(cand, r)
        build = _Builder(r, n_boot, level, seed)
        flips = build.add("delta_flip_rate", a["flip"], b["flip"], binary=True)
        items = {
            "newly_flipping": _ids(flips, (flips["b"] == 1) & (flips["a"] == 0)),
            "fixed": _ids(flips, (flips["a"] == 1) & (flips["b"] == 0)),
        }
        build.add("delta_parse_rate", a["parse"], b["parse"])
        if control:
            pa, pb = _per_item(base_perm, r), _per_item(cand_perm, r)
            build.add("delta_delta_order", pa["flip"] - a["flip"], pb["flip"] - b["flip"])
        else:
            right = build.add("delta_accuracy", a["correct"], b["correct"], binary=True)
            items["newly_wrong"] = _ids(right, (right["a"] == 1) & (right["b"] == 0))
            items["newly_right"] = _ids(right, (right["a"] == 0) & (right["b"] == 1))
        out[r] = build.build(items)
    return CellComparison(
        candidate.model_id,
        baseline.model_id,
        cell,
        dataset,
        primary,
        out,
        overlap,
        drawn=[str(i) for i in dict.fromkeys(cand["item_id"])],
    )
