"""Trials of one judge consensus cell: candidate sets, the K shared orderings (manifested), one
judge call per (item, ordering), each run read back to source indices."""

from __future__ import annotations

from flipgate import FlipgateError
from flipgate.backends.base import Request
from flipgate.calls import Auditor
from flipgate.grammar import Manifest
from flipgate.items import DatasetSpec, Item, load_items
from flipgate.judges.names import JUDGE_CELL
from flipgate.judges.plan import JudgePlan
from flipgate.judging.listwise import listwise_request, run_judgement
from flipgate.judging.orderings import judge_orderings
from flipgate.metrics.consensus import RunJudgement
from flipgate.metrics.judging import JudgedItem

#: candidate numbers are single digits (one token each for the logprob readout)
MAX_CANDIDATES = 9


def judgeable(item: Item) -> bool:
    """A text candidate set with a gold candidate and 2–9 candidates."""
    return item.gold is not None and 2 <= item.n_options <= MAX_CANDIDATES and not item.images


class JudgeRunner:
    def __init__(self, auditor: Auditor, plan: JudgePlan):
        self.auditor, self.plan = auditor, plan

    def items(self, spec: DatasetSpec) -> list[Item]:
        """The first N candidate sets of the seed's shuffle (``--items-per-dataset``, else the
        dataset's ``n``, else ``items_per_dataset`` of ``audit.judges``)."""
        n = self.auditor.n_override or spec.n or self.plan.n_items
        items = load_items(spec, n, self.auditor.config.seed, keep=judgeable)
        if len(items) < 2:
            raise FlipgateError(
                f"dataset {spec.name!r}: {len(items)} candidate set(s) with a gold candidate and "
                f"2-{MAX_CANDIDATES} candidates; the judge suite needs at least 2"
            )
        return items

    def manifest(self, spec: DatasetSpec, items: list[Item]) -> None:
        """Write each item's orderings (shared by every item with as many candidates) to
        fixtures/manifests/judges, before any call."""
        seed, k = self.auditor.config.seed, self.plan.consensus.k
        entries = {it.item_id: self.orderings(it.n_options) for it in items}
        manifest = Manifest(
            f"{JUDGE_CELL}_{self.plan.consensus.orderings}", spec.name, k, seed, entries
        )
        path = manifest.save(self.auditor.paths.manifests / "judges")
        self.auditor.store.add_manifest(JUDGE_CELL, spec.name, k, manifest.sha256, str(path))

    def orderings(self, n: int) -> list[tuple[int, ...]]:
        c = self.plan.consensus
        return judge_orderings(n, c.k, self.auditor.config.seed, c.orderings)

    def plan_calls(
        self, spec: DatasetSpec, items: list[Item], readout: str
    ) -> list[tuple[Item, int, tuple[int, ...], Request]]:
        """(item, ordering index, ordering, request) of every call, item by item."""
        shown = {it.item_id: self.orderings(it.n_options) for it in items}
        return [
            (
                it,
                o,
                perm,
                listwise_request(
                    it.question,
                    [it.options[source] for source in perm],
                    readout,
                    (spec.name, it.item_id, JUDGE_CELL, o, 0),
                ),
            )
            for it in items
            for o, perm in enumerate(shown[it.item_id])
        ]

    def judged(self, model_id: str, spec: DatasetSpec) -> list[JudgedItem]:
        """Every item's runs; each run is also a trial in the store (its single top pick is the
        readout's label, None for a tie or a parse failure)."""
        readout = self.plan.readout_for(self.auditor.model(model_id))
        items = self.items(spec)
        self.manifest(spec, items)
        calls = self.plan_calls(spec, items, readout)
        self.auditor.store.set_planned(model_id, spec.name, JUDGE_CELL, len(calls))
        outputs, cached = self.auditor.outputs(
            model_id, [c[3] for c in calls], use_cache=True, label=f"{JUDGE_CELL}/{spec.name}"
        )
        trial = self.auditor.trial_maker(model_id, spec.name)
        runs: dict[str, list[RunJudgement]] = {it.item_id: [] for it in items}
        trials = []
        for (it, o, perm, req), out, hit in zip(calls, outputs, cached):
            run = run_judgement(out, req, perm, readout)
            runs[it.item_id].append(run)
            pick = run.pick()
            trials.append(
                trial(
                    req,
                    out,
                    hit,
                    item_id=it.item_id,
                    facet=JUDGE_CELL,
                    condition=o,
                    permutation=list(perm),
                    sample=0,
                    readouts={readout: None if pick is None else str(perm.index(pick) + 1)},
                    mapped={readout: pick},
                    correct={readout: None if pick is None else pick == it.gold},
                    gold=str(it.gold),
                    n_classes=it.n_options,
                )
            )
        self.auditor.store.add_trials(trials)
        return [
            JudgedItem(it.item_id, it.gold, runs[it.item_id], str(it.meta.get("source", "")))
            for it in items
            if it.gold is not None  # always (judgeable)
        ]


def planned_calls(plan: JudgePlan, spec: DatasetSpec, seed: int, n_override: int | None) -> int:
    """Judge calls a cell plans (the live progress display), from the items alone."""
    items = load_items(spec, n_override or spec.n or plan.n_items, seed, keep=judgeable)
    c = plan.consensus
    return sum(len(judge_orderings(it.n_options, c.k, seed, c.orderings)) for it in items)
