"""Readout decomposition of a flip rate (docs/definitions.md §8; flipbench).

For a perturbation axis a and readouts e with the faithful reference e* (regex over the generated
text): ``total(a, e)`` is the flip rate under e, ``genuine(a) = total(a, e*)``, and
``artifact(a, e) = total(a, e) − genuine(a)``, estimated per item as
``flip_e(i) − flip_e*(i)`` over the items both readouts parsed at least twice, with a paired
bootstrap over items (the same resampled items for both readouts). ``artifact_share`` is the
share of e's flips on those items that e* does not see (its own misreadings):
``#{flip_e = 1, flip_e* = 0} / #{flip_e = 1}``, in [0, 1], 0 when nothing flips under e. It
equals ``artifact / total`` when e misses no flip of e*'s; the net ``artifact`` is negative when
e hides more of the model's flips than it adds.

The item means a ``lower``/``upper`` threshold names are decided by the one-sided tests of
docs/definitions.md §12 on their per-item values (:func:`decomposition_item_values`): the flip
rates (``flip_rate``, ``genuine_flip_rate``) on each item's any-flip (binary), ``artifact`` on
``flip_e(i) − flip_e*(i)`` (paired, in {−1, 0, 1}) and ``parse_rate`` on each item's share of
parsed conditions (bounded). ``artifact_share`` is a ratio of counts, not an item mean.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from flipgate.metrics.bootstrap import bootstrap_draws
from flipgate.metrics.order import any_flip
from flipgate.metrics.sequential import ItemValues
from flipgate.results import MetricEstimate


def item_flips(trials: pd.DataFrame, readout: str) -> pd.Series:
    """Per item (index ``item_id``): 1[the readout's answers differ across the axis's
    conditions], NaN when fewer than 2 conditions parsed (docs/definitions.md §3 ``any_flip``)."""
    flips = {}
    for item_id, rows in trials.groupby("item_id", sort=True):
        answers = [m.get(readout) for m in rows["mapped"]]
        parsed = [a for a in answers if a is not None]
        flips[item_id] = float(any_flip(answers)) if len(parsed) >= 2 else np.nan
    return pd.Series(flips, dtype=float).rename_axis("item_id")


def item_parse_shares(trials: pd.DataFrame, readout: str) -> pd.Series:
    """Per item (index ``item_id``, in the order the items were drawn): the share of its
    conditions whose readout gave a label (the per-item values behind ``parse_rate``)."""
    parsed = trials["readouts"].map(lambda r: float(r.get(readout) is not None))
    order = list(dict.fromkeys(trials["item_id"]))
    return parsed.groupby(trials["item_id"]).mean().reindex(order).rename_axis("item_id")


def parse_rate(trials: pd.DataFrame, readout: str) -> float:
    """Share of the axis's trials whose readout gave a label."""
    parsed = [r.get(readout) is not None for r in trials["readouts"]]
    return float(np.mean(parsed)) if parsed else float("nan")


class ReadoutSplit(BaseModel):
    """One readout on one axis: its flip rate, and (for e ≠ e*) the artifact part of it."""

    model_config = ConfigDict(frozen=True)

    readout: str
    flip_rate: MetricEstimate
    parse_rate: float
    artifact: MetricEstimate | None = None
    artifact_share: MetricEstimate | None = None

    def metrics(self) -> dict[str, MetricEstimate]:
        """The estimates a threshold can name (``flip_rate``, ``artifact``, ``artifact_share``,
        ``parse_rate``)."""
        out = {"flip_rate": self.flip_rate, "parse_rate": MetricEstimate(estimate=self.parse_rate)}
        if self.artifact is not None:
            out["artifact"] = self.artifact
        if self.artifact_share is not None:
            out["artifact_share"] = self.artifact_share
        return out


class AxisDecomposition(BaseModel):
    """docs/definitions.md §8 for one axis of one (model, dataset): genuine flip rate under the
    reference readout, each readout's split, and the per-item flip surface
    (``surface[readout][item_id]`` = 1 flipped, 0 stable, None unparsed)."""

    model_config = ConfigDict(frozen=True)

    axis: str
    reference: str
    n_items: int
    n_conditions: int
    genuine: MetricEstimate
    readouts: dict[str, ReadoutSplit]
    surface: dict[str, dict[str, int | None]]
    #: per readout, per item in the order drawn: the share of its conditions the readout parsed
    #: (empty in records written before it was kept)
    parsed: dict[str, dict[str, float]] = {}

    def metrics(self, readout: str) -> dict[str, MetricEstimate]:
        """A readout's estimates, with ``genuine_flip_rate`` under the reference readout."""
        block = self.readouts[readout].metrics()
        if readout == self.reference:
            block["genuine_flip_rate"] = self.genuine
        return block


def _flip_values(surface: dict[str, int | None], order: list[str]) -> np.ndarray:
    """A readout's flip surface as values in ``order`` (NaN: parsed fewer than twice)."""
    values = [surface.get(i) for i in order]
    return np.array([np.nan if v is None else float(v) for v in values])


def decomposition_item_values(result: AxisDecomposition, readout: str) -> dict[str, ItemValues]:
    """The per-item values behind ``readout``'s item-mean metrics on ``result``'s axis, in the
    order the items were drawn where the record kept it (docs/definitions.md §12.1): ``flip_rate``
    (and ``genuine_flip_rate`` under the reference) binary any-flips; ``artifact`` (e ≠ e*)
    ``flip_e(i) − flip_e*(i)``, paired in [−1, 1], NaN where either readout parsed fewer than two
    conditions; ``parse_rate`` the per-item parsed share (bounded; only where the record kept
    it). Their scored means are the record's estimates. Empty for a readout not measured."""
    if readout not in result.readouts:
        return {}
    drawn = next(iter(result.parsed.values()), None)  # every readout's in the same order
    order = list(drawn) if drawn else list(result.surface[readout])
    flips = _flip_values(result.surface[readout], order)
    out = {"flip_rate": ItemValues.of(flips, kind="binary")}
    if readout == result.reference:
        out["genuine_flip_rate"] = out["flip_rate"]
    else:
        reference = _flip_values(result.surface[result.reference], order)
        out["artifact"] = ItemValues.of(flips - reference, -1.0, 1.0, "paired")
    shares = result.parsed.get(readout)
    if shares:
        out["parse_rate"] = ItemValues.of([shares[i] for i in order], kind="bounded")
    return out


def _estimate(values: np.ndarray, n: int, level: float, seed: int) -> MetricEstimate:
    kept = values[~np.isnan(values)]
    estimate = float(kept.mean()) if kept.size else float("nan")
    return MetricEstimate.from_draws(
        estimate, bootstrap_draws(kept, None, n, seed), level, kept.size
    )


def _spurious_share(fe: np.ndarray, fr: np.ndarray) -> np.ndarray:
    """Per row of item flips: the share of e's flips that the reference does not see, 0 where
    e flips on no item."""
    flips = fe.sum(axis=1)
    spurious = (fe * (1 - fr)).sum(axis=1)
    return np.where(flips > 0, spurious / np.where(flips > 0, flips, 1), 0.0)


def paired_artifact(
    flips_e: pd.Series, flips_ref: pd.Series, n: int = 1000, level: float = 0.95, seed: int = 42
) -> tuple[MetricEstimate, MetricEstimate]:
    """(artifact, artifact_share) of readout e against the reference, over the items both parsed
    at least twice; one paired bootstrap gives both (the same item resamples)."""
    both = pd.concat([flips_e, flips_ref], axis=1, keys=["e", "ref"]).dropna()
    fe, fr = both["e"].to_numpy(), both["ref"].to_numpy()
    m = len(both)
    if not m:
        empty = np.empty(0)
        return (
            MetricEstimate.from_draws(float("nan"), empty, level, 0),
            MetricEstimate.from_draws(float("nan"), empty, level, 0),
        )
    idx = np.random.default_rng(seed).integers(0, m, size=(n, m))
    artifact = fe[idx].mean(axis=1) - fr[idx].mean(axis=1)
    share = _spurious_share(fe[idx], fr[idx])
    art_est = float(fe.mean() - fr.mean())
    share_est = float(_spurious_share(fe[None, :], fr[None, :])[0])
    return (
        MetricEstimate.from_draws(art_est, artifact, level, m),
        MetricEstimate.from_draws(share_est, share, level, m),
    )


def decompose(
    trials: pd.DataFrame,
    axis: str,
    readouts: list[str],
    reference: str = "regex",
    n: int = 1000,
    level: float = 0.95,
    seed: int = 42,
) -> AxisDecomposition:
    """docs/definitions.md §8 over one axis's trials (one row per item × condition, ``mapped``
    and ``readouts`` dicts per readout)."""
    if reference not in readouts:
        raise ValueError(f"the reference readout {reference!r} is not among {readouts}")
    flips = {r: item_flips(trials, r) for r in readouts}
    splits = {}
    for r in readouts:
        artifact = share = None
        if r != reference:
            artifact, share = paired_artifact(flips[r], flips[reference], n, level, seed)
        splits[r] = ReadoutSplit(
            readout=r,
            flip_rate=_estimate(flips[r].to_numpy(), n, level, seed),
            parse_rate=parse_rate(trials, r),
            artifact=artifact,
            artifact_share=share,
        )
    return AxisDecomposition(
        axis=axis,
        reference=reference,
        n_items=int(trials["item_id"].nunique()),
        n_conditions=int(trials["condition"].nunique()),
        genuine=splits[reference].flip_rate,
        readouts=splits,
        surface={
            r: {i: None if np.isnan(v) else int(v) for i, v in f.items()} for r, f in flips.items()
        },
        parsed={r: item_parse_shares(trials, r).to_dict() for r in readouts},
    )
