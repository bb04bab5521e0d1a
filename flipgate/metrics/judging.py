"""Judge order-robustness and consensus metrics (docs/definitions.md §9; PCFJudge §3.4, §4.4).

Per item the judge ran over K orderings of its candidates (``RunJudgement`` per ordering, ordering
0 the canonical one). Accuracy is exact top-1: a verdict is right when its single winner is the
gold candidate; a tie or a parse failure is a miss (counted, never broken by guessing).

- ``direct`` = ordering 0 alone; ``consensus`` = :func:`flipgate.metrics.consensus.consensus` over
  all K; ``consensus_gain`` = consensus − direct accuracy, item-paired bootstrap;
- improved / regressed = items only consensus / only direct gets right, with the exact two-sided
  sign test on them (binomial, p = ½);
- ``judge_flip_rate`` = share of items whose top set differs between parsed orderings (≥ 2);
- ``run_accuracy`` p = share of (item, ordering) runs whose single top pick is gold; the majority
  vote over the K picks errs when gold has no strict majority, bounded by exp(−2K(p − ½)²) for
  p > ½ (independent runs);
- accuracy at k = 1…K: the consensus of the first k orderings;
- with several ``source`` buckets (JudgeBench), macro accuracies: the mean of per-source
  accuracies, with a bootstrap stratified by source.

A ``lower``/``upper`` threshold on an item mean is decided by the one-sided tests of
docs/definitions.md §12.1 on its per-item values (:func:`judge_item_values`); the macro
accuracies (means of per-source means) keep the §5 bootstrap-CI rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.stats import binomtest

from flipgate.metrics.bootstrap import bootstrap_draws, paired_bootstrap_draws
from flipgate.metrics.consensus import ConsensusWeights, RunJudgement, consensus, majority_bound
from flipgate.metrics.sequential import ItemValues
from flipgate.results import MetricEstimate


@dataclass(frozen=True)
class JudgedItem:
    """One item's K runs (ordering 0 first), its gold candidate and its source bucket."""

    item_id: str
    gold: int
    runs: list[RunJudgement]
    source: str = ""


class ItemVerdicts(BaseModel):
    """What one item's direct and consensus judgements chose (None: tie or no parse)."""

    model_config = ConfigDict(frozen=True)

    gold: int
    direct: int | None
    consensus: int | None
    picks: list[int | None]
    flipped: bool | None
    n_parsed: int
    source: str = ""


class SignTest(BaseModel):
    model_config = ConfigDict(frozen=True)

    improved: int
    regressed: int
    p_value: float | None  # None: no discordant item


class JudgeConsensusResult(BaseModel):
    """Every number of one (judge, dataset) cell; read by the gate, the card, Allure and the
    terminal."""

    model_config = ConfigDict(frozen=True)

    n_items: int
    k: int
    weights: tuple[float, float, float, float]
    tie_tolerance: float
    parse_rate: float
    judge_flip_rate: MetricEstimate
    direct_accuracy: MetricEstimate
    consensus_accuracy: MetricEstimate
    consensus_gain: MetricEstimate
    sign_test: SignTest
    consensus_tie_rate: float
    run_accuracy: float
    majority_error: float
    majority_bound: float | None
    accuracy_at_k: list[MetricEstimate]
    #: per source bucket: n and direct / consensus accuracy (point estimates)
    by_source: dict[str, dict[str, float]] = {}
    direct_macro_accuracy: MetricEstimate | None = None
    consensus_macro_accuracy: MetricEstimate | None = None
    items: dict[str, ItemVerdicts] = {}

    def metrics(self) -> dict[str, MetricEstimate]:
        """The estimates a ``facet: judges`` threshold can name."""
        out = {
            "judge_flip_rate": self.judge_flip_rate,
            "direct_accuracy": self.direct_accuracy,
            "consensus_accuracy": self.consensus_accuracy,
            "consensus_gain": self.consensus_gain,
            "parse_rate": MetricEstimate(estimate=self.parse_rate),
        }
        if self.consensus_macro_accuracy is not None:
            out["direct_macro_accuracy"] = self.direct_macro_accuracy  # type: ignore[assignment]
            out["consensus_macro_accuracy"] = self.consensus_macro_accuracy
        return out


def _hit(pick: int | None, gold: int) -> float:
    return float(pick is not None and pick == gold)


def judge_item_values(result: JudgeConsensusResult) -> dict[str, ItemValues]:
    """The per-set values behind the cell's item-mean metrics, in the order the sets were judged
    (docs/definitions.md §12.1), from the record's per-item verdicts: ``judge_flip_rate``
    (binary: the top set changed across the parsed orderings; NaN with fewer than two parsed),
    ``direct_accuracy`` and ``consensus_accuracy`` (binary hits), ``consensus_gain`` (consensus
    hit − direct hit, paired in [−1, 1]) and ``parse_rate`` (the set's share of parsed runs,
    bounded). Empty for a record without per-item verdicts."""
    verdicts = list(result.items.values())
    if not verdicts:
        return {}
    direct = np.array([_hit(v.direct, v.gold) for v in verdicts])
    final = np.array([_hit(v.consensus, v.gold) for v in verdicts])
    flips = [np.nan if v.flipped is None else float(v.flipped) for v in verdicts]
    parsed = [v.n_parsed / len(v.picks) if v.picks else np.nan for v in verdicts]
    return {
        "judge_flip_rate": ItemValues.of(flips, kind="binary"),
        "direct_accuracy": ItemValues.of(direct, kind="binary"),
        "consensus_accuracy": ItemValues.of(final, kind="binary"),
        "consensus_gain": ItemValues.of(final - direct, -1.0, 1.0, "paired"),
        "parse_rate": ItemValues.of(parsed, kind="bounded"),
    }


def sign_test(improved: int, regressed: int) -> SignTest:
    """Exact two-sided sign test on the discordant items."""
    n = improved + regressed
    p = float(binomtest(improved, n, 0.5).pvalue) if n else None
    return SignTest(improved=improved, regressed=regressed, p_value=p)


def _estimate(values: np.ndarray, n_boot: int, level: float, seed: int) -> MetricEstimate:
    kept = values[~np.isnan(values)]
    estimate = float(kept.mean()) if kept.size else float("nan")
    return MetricEstimate.from_draws(
        estimate, bootstrap_draws(values, None, n_boot, seed), level, int(kept.size)
    )


def _macro(
    hits: np.ndarray, sources: np.ndarray, n_boot: int, level: float, seed: int
) -> MetricEstimate:
    """Mean of per-source accuracies, bootstrapped within each source."""
    groups = [hits[sources == s] for s in np.unique(sources)]
    rng = np.random.default_rng(seed)
    draws = np.mean(
        [g[rng.integers(0, g.size, size=(n_boot, g.size))].mean(axis=1) for g in groups], axis=0
    )
    estimate = float(np.mean([g.mean() for g in groups]))
    return MetricEstimate.from_draws(estimate, draws, level, int(hits.size))


def judge_consensus(
    judged: list[JudgedItem],
    weights: ConsensusWeights = ConsensusWeights(),
    tie_tolerance: float = 1e-6,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
) -> JudgeConsensusResult:
    """docs/definitions.md §9 over one cell's items."""
    if not judged:
        raise ValueError("no judged items")
    k = max(len(j.runs) for j in judged)
    items: dict[str, ItemVerdicts] = {}
    hits_at_k = np.zeros((len(judged), k))
    ties = 0
    for row, j in enumerate(judged):
        final = None
        for upto in range(1, k + 1):  # the last one is the consensus of all the item's runs
            final = consensus(j.runs[:upto], weights, tie_tolerance)
            hits_at_k[row, upto - 1] = _hit(None if final is None else final.pick(), j.gold)
        ties += final is not None and len(final.winners) > 1
        tops = [r.top_set() for r in j.runs if r.parsed]
        items[j.item_id] = ItemVerdicts(
            gold=j.gold,
            direct=j.runs[0].pick(),
            consensus=None if final is None else final.pick(),
            picks=[r.pick() for r in j.runs],
            flipped=len(set(tops)) > 1 if len(tops) >= 2 else None,
            n_parsed=len(tops),
            source=j.source,
        )
    verdicts = list(items.values())
    direct = np.array([_hit(v.direct, v.gold) for v in verdicts])
    final_hits = np.array([_hit(v.consensus, v.gold) for v in verdicts])
    flips = np.array([np.nan if v.flipped is None else float(v.flipped) for v in verdicts])
    run_hits = np.array([_hit(p, v.gold) for v in verdicts for p in v.picks])
    majority = np.array(
        [sum(p == v.gold for p in v.picks) > len(v.picks) / 2 for v in verdicts], dtype=float
    )
    p = float(run_hits.mean())
    gain = float(final_hits.mean() - direct.mean())
    sources = np.array([v.source for v in verdicts])
    by_source = {
        str(s): {
            "n": float((sources == s).sum()),
            "direct_accuracy": float(direct[sources == s].mean()),
            "consensus_accuracy": float(final_hits[sources == s].mean()),
        }
        for s in np.unique(sources)
    }
    several = len(by_source) > 1
    return JudgeConsensusResult(
        n_items=len(judged),
        k=k,
        weights=weights.as_tuple(),
        tie_tolerance=tie_tolerance,
        parse_rate=float(np.mean([r.parsed for j in judged for r in j.runs])),
        judge_flip_rate=_estimate(flips, n_boot, level, seed),
        direct_accuracy=_estimate(direct, n_boot, level, seed),
        consensus_accuracy=_estimate(final_hits, n_boot, level, seed),
        consensus_gain=MetricEstimate.from_draws(
            gain, paired_bootstrap_draws(final_hits, direct, n_boot, seed), level, len(judged)
        ),
        sign_test=sign_test(
            int(((final_hits == 1) & (direct == 0)).sum()),
            int(((final_hits == 0) & (direct == 1)).sum()),
        ),
        consensus_tie_rate=ties / len(judged),
        run_accuracy=p,
        majority_error=float(1 - majority.mean()),
        majority_bound=majority_bound(k, p),
        accuracy_at_k=[_estimate(hits_at_k[:, i], n_boot, level, seed) for i in range(k)],
        by_source=by_source,
        direct_macro_accuracy=_macro(direct, sources, n_boot, level, seed) if several else None,
        consensus_macro_accuracy=(
            _macro(final_hits, sources, n_boot, level, seed) if several else None
        ),
        items=items,
    )
