"""The order suite's measurement (docs/definitions.md §3, §12): a facet or control cell's
trials, measured once per run — all its items, or drawn sequentially until its thresholds (and
its dependents', §12.4) are decided — and read back by every reader of the cell (its own test, its
control's, the ODI panel's, a regression case's); the judge's sem-flip verdicts of a judged cell.
Model calls go through the core's :class:`~flipgate.calls.Auditor`; what a cell asks is
:mod:`flipgate.facet_plan`'s."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from flipgate.backends import Request
from flipgate.backends.base import measures_replicates
from flipgate.calls import Auditor
from flipgate.cell import CellKey
from flipgate.facets import get_facet
from flipgate.gate.sequential import Dependent, SequentialStop, draws_sequentially, run_sequential
from flipgate.items import Item
from flipgate.metrics.sequential import ItemValues
from flipgate.readouts import read_label
from flipgate.results import trials_frame
from flipgate.summary import item_values


def order_cells(auditor: Auditor) -> OrderCells:
    """The order cells of ``auditor``'s process (one per auditor)."""
    return auditor.memo("order-cells", lambda: OrderCells(auditor))


def _facet(name: str) -> str:
    """The facet of a facet or control cell name."""
    return CellKey.parse(name).facet


class OrderCells:
    """Measures and reads back one process's facet and control cells."""

    def __init__(self, auditor: Auditor):
        self.auditor = auditor
        self.plans = auditor.plans

    def unmeasurable(self, model_id: str, dataset: str, facet_name: str) -> str | None:
        """Why ``model_id`` cannot take this facet × dataset cell (its items carry images and the
        model takes none), or None when it can."""
        facet = get_facet(facet_name)
        needs_images = facet.needs_images or any(
            it.images for it in self.plans.items(dataset, facet_name)
        )
        if needs_images and not self.auditor.backend(model_id).supports_images:
            for cell, where in self.auditor.config.cells(
                model_id
            ):  # nothing to wait for (progress)
                if where == dataset and CellKey.parse(cell).facet == facet_name:
                    self.auditor.store.set_planned(model_id, dataset, cell, 0)
            return f"model {model_id!r} takes no images: {facet_name} on {dataset} not measured"
        return None

    def measured_trials(self, model_id: str, dataset: str, name: str) -> pd.DataFrame:
        """This run's trials of a cell, measured once: read back from the run store when a test
        of this run (the cell's own, a control's, the ODI panel's or a regression cell's) already
        measured it, else measured now (:meth:`trials`, or :meth:`sequential_trials` for a
        sequential cell: the items it drew before it stopped), so every reader of a cell sees
        the same trials."""
        if self.is_sequential(name):
            return self.sequential_trials(model_id, dataset, name)[0]
        n, drawn = (
            self.n_items(model_id, dataset, name),
            len(self.plans.items(dataset, _facet(name))),
        )
        stored = self._stored(model_id, dataset, name, n)
        if stored is not None:
            return stored
        if n == drawn:
            return self.trials(model_id, dataset, name)
        trials = self.trials(model_id, dataset, name, (0, n))
        self.auditor.store.set_planned(model_id, dataset, name, len(trials))
        return trials

    def n_items(self, model_id: str, dataset: str, name: str) -> int:
        """How many of the drawn items a model's cell takes: all of them, or fewer where the
        model's entry caps the dataset lower (``datasets: [{name, n}]``)."""
        drawn = len(self.plans.items(dataset, _facet(name)))
        return min(drawn, self.auditor.config.n_items(dataset, self.auditor.n_override, model_id))

    def _stored(self, model_id: str, dataset: str, name: str, n_items: int) -> pd.DataFrame | None:
        """The run store's trials of the first ``n_items`` items of a cell's plan, in the plan's
        order, or None when the store lacks one of them."""
        plan = self.plans.plan_items(dataset, name, 0, n_items)
        keys = [(it.item_id, o, s) for it, o, _, s in plan]
        stored = self.auditor.store.trials(model_id=model_id, dataset=dataset, facet=name)
        got = list(zip(stored["item_id"], stored["condition"], stored["sample"]))
        position = {key: i for i, key in enumerate(keys)}  # the plan's order, as trials() gives
        mine = [i for i, key in enumerate(got) if key in position]
        if sorted(got[i] for i in mine) != sorted(keys):
            return None
        order = sorted(mine, key=lambda i: position[got[i]])
        return stored.iloc[order].reset_index(drop=True)

    def is_sequential(self, name: str) -> bool:
        """Whether a facet or control cell draws its items sequentially: ``audit.sequential`` is
        on, the thresholds are known, and the facet needs no judge over its whole item set."""
        return self.auditor.thresholds_dir is not None and draws_sequentially(
            self.auditor.sequential, name
        )

    def stop(self, model_id: str, dataset: str, name: str) -> SequentialStop | None:
        """Where this run's sequential cell stopped (None before it ran, or for a fixed-N cell)."""
        for record in self.auditor.store.records(SequentialStop, model_id):
            if (record.dataset, record.cell) == (dataset, name):
                return record
        return None

    def sequential_trials(
        self, model_id: str, dataset: str, name: str
    ) -> tuple[pd.DataFrame, SequentialStop]:
        """A sequential cell's trials and where it stopped, measured once per run: items enter in
        the seeded order, ``batch_items`` at a time, until every threshold of the cell that a
        confidence sequence decides is decided (from ``min_items`` on) or the cap
        (``items_per_dataset``). A control draws from the items its facet used, so Δ_order stays
        paired."""
        stop = self.stop(model_id, dataset, name)
        if stop is not None:
            stored = self._stored(model_id, dataset, name, stop.n_items)
            if stored is not None:
                return stored, stop
        assert self.auditor.sequential is not None and self.auditor.thresholds_dir is not None
        cell = CellKey.parse(name)
        cap, perm, test_cap = self.n_items(model_id, dataset, cell.facet), None, None
        if cell.is_control:
            perm, facet_stop = self.sequential_trials(model_id, dataset, cell.facet)
            cap, test_cap = facet_stop.n_items, facet_stop.looks.cap
        readouts, primary = self.auditor.readouts(model_id, cell.facet)
        all_thresholds = self.auditor.thresholds(model_id)
        # a control whose backend copies its replicates decides nothing (its thresholds are not
        # applicable, docs/definitions.md §12.5): it draws its facet's items and holds nothing
        thresholds = (
            all_thresholds.for_cell(name, dataset)
            if not cell.is_control or measures_replicates(self.auditor.backend(model_id))
            else []
        )
        k = self.auditor.config.k
        # an upper bound until the stop lowers it (the live display says so, flipgate.progress)
        self.auditor.store.set_planned(model_id, dataset, name, cap * k, at_most=True)
        frames: list[pd.DataFrame] = []
        drawn = 0

        def measure(n: int) -> dict[tuple[str, str], ItemValues]:
            nonlocal drawn
            frames.append(self.trials(model_id, dataset, name, (drawn, n)))
            drawn = n
            return item_values(pd.concat(frames, ignore_index=True), readouts, perm)

        def measure_control(control: str) -> Callable[[int, pd.DataFrame], dict]:
            """The control's per-item values on the first n items this facet drew."""
            drawn_control: list[pd.DataFrame] = []

            def measure_it(n: int, facet_trials: pd.DataFrame) -> dict:
                if not measures_replicates(self.auditor.backend(model_id)):
                    return {}  # its thresholds are not applicable: it holds nothing
                start = sum(f["item_id"].nunique() for f in drawn_control)
                drawn_control.append(self.trials(model_id, dataset, control, (start, n)))
                control_trials = pd.concat(drawn_control, ignore_index=True)
                return item_values(control_trials, readouts, facet_trials)

            return measure_it

        # a facet keeps drawing while its control's thresholds (and, from the suites, e.g. a
        # regression case's) are open (docs/definitions.md §12.4)
        dependents = [
            Dependent(control, held, measure_control(control))
            for control, d in self.auditor.config.cells(model_id)
            if d == dataset
            and not cell.is_control
            and CellKey.parse(control).is_control
            and CellKey.parse(control).facet == name
            and self.is_sequential(control)
            and (held := all_thresholds.for_cell(control, dataset))
        ]
        if not cell.is_control:
            dependents += [
                d
                for source in self.auditor.dependent_sources
                for d in source(model_id, dataset, name)
            ]
        stop = run_sequential(
            self.auditor.sequential,
            cap,
            thresholds,
            primary,
            measure,
            dependents,
            test_cap,
            lambda: pd.concat(frames, ignore_index=True),
            model_id=model_id,
            dataset=dataset,
            cell=name,
            calls_per_item=k,
            cap_from=cell.facet if cell.is_control else None,
        )
        self.auditor.store.set_planned(model_id, dataset, name, stop.n_items * k)
        self.auditor.store.add_record(stop)
        return pd.concat(frames, ignore_index=True), stop

    def cell_trials(
        self, model_id: str, dataset: str, name: str
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """A cell's trials (:meth:`measured_trials`) and, for a control, those of the facet it
        is compared with (None for a facet cell)."""
        cell = CellKey.parse(name)
        perm = self.measured_trials(model_id, dataset, cell.facet) if cell.is_control else None
        trials = self.measured_trials(model_id, dataset, name)
        return trials, perm

    def trials(
        self, model_id: str, dataset: str, name: str, items: tuple[int, int] | None = None
    ) -> pd.DataFrame:
        """Trials of a facet cell (K manifest orderings) or a control cell such as
        ``same_ordering:option_order`` (the canonical ordering K times, each replicate with its own
        seed and its own response-cache key: a rerun replays the measured noise floor); with
        ``items`` = (first, last), only those of the items ``first`` to ``last`` (exclusive) in
        the seeded order (a sequential cell's batch)."""
        cell = CellKey.parse(name)
        facet_name = cell.facet
        facet = get_facet(facet_name)
        readouts = self.auditor.readouts(model_id, facet_name)[0]
        k = self.auditor.config.k
        plan, requests = self.plans.cell_requests(dataset, name, items)
        if items is None:
            self.auditor.store.set_planned(model_id, dataset, name, len(plan))
        outputs, cached = self.auditor.outputs(
            model_id, requests, use_cache=True, label=f"{name}/{dataset}", by_seed=cell.is_control
        )
        trial = self.auditor.trial_maker(model_id, dataset)
        trials = []
        for (it, o, perm, s), req, out, hit in zip(plan, requests, outputs, cached):
            labels = {r: read_label(r, out, req.labels, req.answer_prefix) for r in readouts}
            mapped = {r: facet.map_back(lab, it, perm) for r, lab in labels.items()}
            trials.append(
                trial(
                    req,
                    out,
                    hit,
                    item_id=it.item_id,
                    facet=name,
                    condition=o,
                    permutation=list(perm),
                    sample=s,
                    readouts=labels,
                    mapped=mapped,
                    correct={r: facet.is_correct(m, it) for r, m in mapped.items()},
                    gold=it.answer if it.gold is None else str(it.gold),
                    n_classes=facet.n_classes(it, k),
                )
            )
        self.auditor.store.add_trials(trials)
        return trials_frame(trials)

    def judgements(
        self, model_id: str, dataset: str, name: str, trials: pd.DataFrame
    ) -> dict[str, str]:
        """Judge verdicts (docs/definitions.md §3.5 sem-flip) per item over the K answers of a
        judged cell; the judge is ``audit.judge`` or the audited model itself."""
        from flipgate.judging import sem_flip_request, verdict_from_label
        from flipgate.judging.permuted import consensus_labels, permuted_requests

        judge_id = self.auditor.config.judge or model_id
        facet = get_facet(CellKey.parse(name).facet)
        items = {it.item_id: it for it in self.plans.items(dataset, facet.name)}
        settings = self.auditor.config.judge_consensus
        groups, order = [], []
        for item_id, g in trials.sort_values("condition").groupby("item_id", sort=True):
            item = items[item_id]
            key = (dataset, item_id, f"judge:{name}", 0)

            def request(shown: list, o: int, item: Item = item, key: tuple = key) -> Request:
                return sem_flip_request(item, shown, key=(*key, o))

            answers = [r.get("regex") for r in g["readouts"]]
            groups.append(permuted_requests(answers, request, settings, self.auditor.config.seed))
            order.append(item_id)
        labels = consensus_labels(
            self.auditor, judge_id, groups, settings, f"judge {name}/{dataset}"
        )
        verdicts = {i: verdict_from_label(label) for i, label in zip(order, labels)}
        self.auditor.store.add_judgements(model_id, dataset, name, judge_id, verdicts)
        return verdicts
