"""The audit runner: turns (model, dataset, facet) into trials, through manifest, cache and
store."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from flipgate import FlipgateError
from flipgate.backends import Backend, Output, Request, create_backend
from flipgate.backends.base import is_streaming, measures_replicates
from flipgate.backends.identity import cache_settings
from flipgate.cache import ResponseCache, cache_key
from flipgate.cell import Cell
from flipgate.config import AuditConfig, ThresholdSet, load_thresholds
from flipgate.facets import get_facet, readouts_for
from flipgate.grammar import GRAMMAR_VERSION, Manifest, item_seed
from flipgate.hashing import sha256_json
from flipgate.items import Item, load_items
from flipgate.metrics.sequential import ItemValues
from flipgate.readouts import read_label
from flipgate.results import Trial, trials_frame
from flipgate.sequential import Dependent, SequentialStop, draws_sequentially, run_sequential
from flipgate.store import TrialStore
from flipgate.summary import item_values

log = logging.getLogger("flipgate")


@dataclass
class Paths:
    store: Path  # reports/runs/<run_id>/trials.sqlite
    cache: Path | None  # response cache sqlite, None = --no-cache
    manifests: Path  # fixtures/manifests
    models: Path  # dequantised model cache


def _facet(name: str) -> str:
    """The facet of a facet or control cell name."""
    return Cell.parse(name).facet


class Auditor:
    """Runs cells for one process (an xdist worker or the whole session); loads each model once."""

    def __init__(
        self,
        config: AuditConfig,
        run_id: str,
        paths: Paths,
        items_per_dataset: int | None = None,
        progress: bool = True,
        control_salt: str | None = None,
        allow_ungated: bool = False,
        thresholds_dir: str | None = None,
        fixed_n: bool = False,
    ):
        self.config = config
        self.run_id = run_id
        self.paths = paths
        self.n_override = items_per_dataset  # --items-per-dataset: one N for every dataset
        self.progress = progress
        #: --fresh-controls: control replicates drawn with new seeds (this run's id as salt), so
        #: their cache keys are new and the noise floor is measured again (docs/definitions.md §3.6)
        self.control_salt = control_salt
        #: --allow-ungated: a cell no threshold can fail is skipped with the reason, not failed
        self.allow_ungated = allow_ungated
        #: the thresholds a sequential cell stops on (None: every cell spends its cap)
        self.thresholds_dir = thresholds_dir
        #: sequential gates (docs/definitions.md §12); None: fixed N (``--fixed-n`` or
        #: ``audit.sequential: false``)
        self.sequential = None if fixed_n else config.sequential
        #: the suites' dependents of a facet cell (flipgate.sequential.Dependent), e.g. the
        #: regression cases that compare it: ``source(model_id, dataset, cell)``; set by the
        #: session (docs/definitions.md §12.4)
        self.dependent_sources: list[Callable[[str, str, str], list[Dependent]]] = []
        self.store = TrialStore(paths.store)
        self.source = os.environ.get("PYTEST_XDIST_WORKER", "main")  # this process, in the store
        self.cache = ResponseCache(paths.cache) if paths.cache else None
        self._backends: dict[str, Backend] = {}
        self._variants: dict[str, dict[str, Any]] = {}
        self._items: dict[tuple[str, str], list[Item]] = {}
        self._plans: dict[tuple[str, str], list[tuple[Item, int, tuple[int, ...], int]]] = {}
        #: prompts this process sent to each model (envelope variants count for their model)
        self.model_calls: Counter[str] = Counter()
        self._thresholds: dict[tuple[str, str], ThresholdSet] = {}

    def thresholds(self, model_id: str, directory: str | None = None) -> ThresholdSet:
        """The thresholds that apply to ``model_id`` in ``directory`` (this run's
        ``--thresholds`` when None), read once per process: every cell, sequential stop and
        regression hold of the session decides on the same set. A bad file raises its one-line
        FlipgateError each time it is asked for."""
        directory = directory if directory is not None else self.thresholds_dir
        if directory is None:
            raise FlipgateError("no thresholds directory is set for this run (--thresholds)")
        key = (str(directory), model_id)
        if key not in self._thresholds:
            self._thresholds[key] = load_thresholds(directory, model_id)
        return self._thresholds[key]

    @property
    def calls(self) -> int:
        """Prompts this process sent to any model."""
        return sum(self.model_calls.values())

    def base_model(self, model_id: str) -> str:
        """The models.yaml id a backend variant (``<model>@...``) belongs to."""
        return self.model(model_id).get("variant_of") or model_id

    # -- models ----------------------------------------------------------------------------------
    def model(self, model_id: str) -> dict[str, Any]:
        """A model's settings: from models.yaml, or a variant registered by :meth:`add_variant`."""
        if model_id in self._variants:
            return self._variants[model_id]
        if model_id not in self.config.models:
            raise FlipgateError(f"{self.config.path}: no model with id {model_id!r}")
        return self.config.models[model_id]

    def add_variant(self, name: str, settings: dict[str, Any]) -> None:
        """A backend variant of a model (e.g. an envelope configuration's quantization and
        decoding), known to this auditor only: models.yaml's roster is not changed."""
        self._variants.setdefault(name, settings)

    def backend(self, model_id: str) -> Backend:
        if model_id not in self._backends:
            cfg = {**self.model(model_id), "_cache_dir": str(self.paths.models)}
            backend = create_backend(cfg)
            self.store.add_model(
                model_id,
                backend.fingerprint,
                {k: v for k, v in cfg.items() if not k.startswith("_")},
            )
            self._backends[model_id] = backend
        return self._backends[model_id]

    def backends(self) -> dict[str, Backend]:
        """The backends this process has loaded, by model id (envelope variants included)."""
        return dict(self._backends)

    # -- cells ---------------------------------------------------------------------------------
    def items(self, dataset: str, facet_name: str) -> list[Item]:
        """The first N items of the seed-42 shuffle that the facet keeps; items a facet's screen
        (e.g. position references) excludes on the way are counted in the store. Drawn once per
        (dataset, facet) and process."""
        if (dataset, facet_name) not in self._items:
            self._items[dataset, facet_name] = self._draw_items(dataset, facet_name)
        return self._items[dataset, facet_name]

    def _draw_items(self, dataset: str, facet_name: str) -> list[Item]:
        facet = get_facet(facet_name)
        spec = self.config.dataset(dataset)
        n_items = self.config.n_items(dataset, self.n_override)
        kept, excluded = [], 0
        for item in load_items(spec, None, self.config.seed):
            if facet.keep(item):
                kept.append(item)
                if len(kept) == n_items:
                    break
            elif facet.screens and facet.screen(item) is not None:
                excluded += 1
        if facet.screens:
            self.store.add_screen(facet_name, dataset, excluded, excluded + len(kept))
        return kept

    def manifest(self, dataset: str, facet_name: str, items: list[Item]) -> Manifest:
        facet = get_facet(facet_name)
        manifest = Manifest.build(
            facet_name,
            dataset,
            {it.item_id: facet.n_units(it) for it in items},
            self.config.k,
            self.config.seed,
        )
        path = manifest.save(self.paths.manifests)
        self.store.add_manifest(facet_name, dataset, manifest.k, manifest.sha256, str(path))
        return manifest

    def unmeasurable(self, model_id: str, dataset: str, facet_name: str) -> str | None:
        """Why ``model_id`` cannot take this facet × dataset cell (its items carry images and the
        model takes none), or None when it can."""
        facet = get_facet(facet_name)
        needs_images = facet.needs_images or any(
            it.images for it in self.items(dataset, facet_name)
        )
        if needs_images and not self.backend(model_id).supports_images:
            for cell, where in self.config.cells(model_id):  # nothing to wait for (progress)
                if where == dataset and Cell.parse(cell).facet == facet_name:
                    self.store.set_planned(model_id, dataset, cell, 0)
            return f"model {model_id!r} takes no images: {facet_name} on {dataset} not measured"
        return None

    def readouts(self, model_id: str, facet_name: str) -> tuple[list[str], str]:
        """(readouts, primary readout) of a model on a facet."""
        model = self.model(model_id)
        return readouts_for(facet_name, model["readouts"], model["primary_readout"])

    def cell_plan(self, dataset: str, name: str) -> list[tuple[Item, int, tuple[int, ...], int]]:
        """The plan ``[(item, condition, permutation, sample)]`` of a facet or control cell
        (manifest orderings; for a control the canonical ordering K times); made, and its
        manifest written, once per process."""
        if (dataset, name) not in self._plans:
            self._plans[dataset, name] = self._make_plan(dataset, name)
        return self._plans[dataset, name]

    def _make_plan(self, dataset: str, name: str) -> list[tuple[Item, int, tuple[int, ...], int]]:
        cell = Cell.parse(name)
        facet_name = cell.facet
        facet = get_facet(facet_name)
        items = self.items(dataset, facet_name)
        if not items:
            raise FlipgateError(
                f"dataset {dataset!r} has no items that facet {facet_name!r} can permute"
            )
        k = self.config.k
        plan: list[tuple[Item, int, tuple[int, ...], int]] = []
        if cell.is_control:
            for it in items:
                canonical = tuple(range(facet.n_units(it)))
                plan += [(it, s, canonical, s) for s in range(k)]
        else:
            manifest = self.manifest(dataset, facet_name, items)
            for it in items:
                plan += [(it, o, perm, 0) for o, perm in enumerate(manifest.entries[it.item_id])]
        return plan

    def replicate_seed(self, item_id: str, replicate: int, n_units: int) -> int:
        """Seed of a same-ordering control's replicate: sha256 of the item, the replicate and
        the run seed (and the --fresh-controls salt)."""
        salt = f"#{self.control_salt}" if self.control_salt else ""
        return item_seed(f"{item_id}#{replicate}{salt}", n_units, self.config.k, self.config.seed)

    def trial_maker(
        self, model_id: str, dataset: str, answered_by: str | None = None
    ) -> Callable[..., Trial]:
        """:meth:`Trial.of` with what every trial of one model on one dataset shares bound: this
        run's id, ``model_id``, the fingerprint of the backend that answered (``answered_by``, a
        variant of the model, or the model itself) and ``dataset``; the caller gives the rest."""
        fingerprint = sha256_json(self.backend(answered_by or model_id).fingerprint)
        return functools.partial(
            Trial.of,
            run_id=self.run_id,
            model_id=model_id,
            model_fingerprint=fingerprint,
            dataset=dataset,
        )

    def cell_requests(
        self, dataset: str, name: str, items: tuple[int, int] | None = None
    ) -> tuple[list[tuple], list[Request]]:
        """A cell's plan (:meth:`cell_plan`; with ``items`` = (first, last), that of those items
        in the seeded order) and its rendered requests."""
        plan = (
            self.cell_plan(dataset, name)
            if items is None
            else self._plan_items(dataset, name, *items)
        )
        cell = Cell.parse(name)
        facet = get_facet(cell.facet)
        requests = [
            facet.render(
                it,
                perm,
                seed=self.replicate_seed(it.item_id, s, len(perm)) if cell.is_control else 0,
                key=(dataset, it.item_id, name, o, s),
            )
            for it, o, perm, s in plan
        ]
        return plan, requests

    def measured_trials(self, model_id: str, dataset: str, name: str) -> pd.DataFrame:
        """This run's trials of a cell, measured once: read back from the run store when a test
        of this run (the cell's own, a control's, the ODI panel's or a regression cell's) already
        measured it, else measured now (:meth:`trials`, or :meth:`sequential_trials` for a
        sequential cell: the items it drew before it stopped), so every reader of a cell sees
        the same trials."""
        if self.is_sequential(name):
            return self.sequential_trials(model_id, dataset, name)[0]
        n, drawn = self.n_items(model_id, dataset, name), len(self.items(dataset, _facet(name)))
        stored = self._stored(model_id, dataset, name, n)
        if stored is not None:
            return stored
        if n == drawn:
            return self.trials(model_id, dataset, name)
        trials = self.trials(model_id, dataset, name, (0, n))
        self.store.set_planned(model_id, dataset, name, len(trials))
        return trials

    def n_items(self, model_id: str, dataset: str, name: str) -> int:
        """How many of the drawn items a model's cell takes: all of them, or fewer where the
        model's entry caps the dataset lower (``datasets: [{name, n}]``)."""
        drawn = len(self.items(dataset, _facet(name)))
        return min(drawn, self.config.n_items(dataset, self.n_override, model_id))

    def _stored(self, model_id: str, dataset: str, name: str, n_items: int) -> pd.DataFrame | None:
        """The run store's trials of the first ``n_items`` items of a cell's plan, in the plan's
        order, or None when the store lacks one of them."""
        plan = self._plan_items(dataset, name, 0, n_items)
        keys = [(it.item_id, o, s) for it, o, _, s in plan]
        stored = self.store.trials(model_id=model_id, dataset=dataset, facet=name)
        got = list(zip(stored["item_id"], stored["condition"], stored["sample"]))
        position = {key: i for i, key in enumerate(keys)}  # the plan's order, as trials() gives
        mine = [i for i, key in enumerate(got) if key in position]
        if sorted(got[i] for i in mine) != sorted(keys):
            return None
        order = sorted(mine, key=lambda i: position[got[i]])
        return stored.iloc[order].reset_index(drop=True)

    def _plan_items(
        self, dataset: str, name: str, first: int, last: int
    ) -> list[tuple[Item, int, tuple[int, ...], int]]:
        """The entries of a cell's plan (:meth:`cell_plan`) for its items ``first`` to ``last``
        (exclusive) in the seeded order."""
        wanted = {it.item_id for it in self.items(dataset, _facet(name))[first:last]}
        return [entry for entry in self.cell_plan(dataset, name) if entry[0].item_id in wanted]

    # -- sequential cells (docs/definitions.md §12) ----------------------------------------------
    def is_sequential(self, name: str) -> bool:
        """Whether a facet or control cell draws its items sequentially: ``audit.sequential`` is
        on, the thresholds are known, and the facet needs no judge over its whole item set."""
        return self.thresholds_dir is not None and draws_sequentially(self.sequential, name)

    def stop(self, model_id: str, dataset: str, name: str) -> SequentialStop | None:
        """Where this run's sequential cell stopped (None before it ran, or for a fixed-N cell)."""
        for record in self.store.records(SequentialStop, model_id):
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
        assert self.sequential is not None and self.thresholds_dir is not None
        cell = Cell.parse(name)
        cap, perm, test_cap = self.n_items(model_id, dataset, cell.facet), None, None
        if cell.is_control:
            perm, facet_stop = self.sequential_trials(model_id, dataset, cell.facet)
            cap, test_cap = facet_stop.n_items, facet_stop.looks.cap
        readouts, primary = self.readouts(model_id, cell.facet)
        all_thresholds = self.thresholds(model_id)
        # a control whose backend copies its replicates decides nothing (its thresholds are not
        # applicable, docs/definitions.md §12.5): it draws its facet's items and holds nothing
        thresholds = (
            all_thresholds.for_cell(name, dataset)
            if not cell.is_control or measures_replicates(self.backend(model_id))
            else []
        )
        k = self.config.k
        # an upper bound until the stop lowers it (the live display says so, flipgate.progress)
        self.store.set_planned(model_id, dataset, name, cap * k, at_most=True)
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
                if not measures_replicates(self.backend(model_id)):
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
            for control, d in self.config.cells(model_id)
            if d == dataset
            and not cell.is_control
            and Cell.parse(control).is_control
            and Cell.parse(control).facet == name
            and self.is_sequential(control)
            and (held := all_thresholds.for_cell(control, dataset))
        ]
        if not cell.is_control:
            dependents += [
                d for source in self.dependent_sources for d in source(model_id, dataset, name)
            ]
        stop = run_sequential(
            self.sequential,
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
        self.store.set_planned(model_id, dataset, name, stop.n_items * k)
        self.store.add_record(stop)
        return pd.concat(frames, ignore_index=True), stop

    def cell_trials(
        self, model_id: str, dataset: str, name: str
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """A cell's trials (:meth:`measured_trials`) and, for a control, those of the facet it
        is compared with (None for a facet cell)."""
        cell = Cell.parse(name)
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
        cell = Cell.parse(name)
        facet_name = cell.facet
        facet = get_facet(facet_name)
        readouts = self.readouts(model_id, facet_name)[0]
        k = self.config.k
        plan, requests = self.cell_requests(dataset, name, items)
        if items is None:
            self.store.set_planned(model_id, dataset, name, len(plan))
        outputs, cached = self.outputs(
            model_id, requests, use_cache=True, label=f"{name}/{dataset}", by_seed=cell.is_control
        )
        trial = self.trial_maker(model_id, dataset)
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
        self.store.add_trials(trials)
        return trials_frame(trials)

    def judgements(
        self, model_id: str, dataset: str, name: str, trials: pd.DataFrame
    ) -> dict[str, str]:
        """Judge verdicts (docs/definitions.md §3.5 sem-flip) per item over the K answers of a
        judged cell; the judge is ``audit.judge`` or the audited model itself."""
        from flipgate.judge import sem_flip_request, verdict_from_label
        from flipgate.judge.permuted import consensus_labels, permuted_requests

        judge_id = self.config.judge or model_id
        facet = get_facet(Cell.parse(name).facet)
        items = {it.item_id: it for it in self.items(dataset, facet.name)}
        settings = self.config.judge_consensus
        groups, order = [], []
        for item_id, g in trials.sort_values("condition").groupby("item_id", sort=True):
            item = items[item_id]
            key = (dataset, item_id, f"judge:{name}", 0)

            def request(shown: list, o: int, item: Item = item, key: tuple = key) -> Request:
                return sem_flip_request(item, shown, key=(*key, o))

            answers = [r.get("regex") for r in g["readouts"]]
            groups.append(permuted_requests(answers, request, settings, self.config.seed))
            order.append(item_id)
        labels = consensus_labels(self, judge_id, groups, settings, f"judge {name}/{dataset}")
        verdicts = {i: verdict_from_label(label) for i, label in zip(order, labels)}
        self.store.add_judgements(model_id, dataset, name, judge_id, verdicts)
        return verdicts

    def cache_keys(
        self,
        model_id: str,
        requests: list[Request],
        grammar_version: int | None = GRAMMAR_VERSION,
        by_seed: bool = False,
    ) -> list[str]:
        """Response-cache keys of ``requests`` for ``model_id`` (see :meth:`outputs`); a model
        whose identity is unverified is keyed on this run too (no answer reused across runs)."""
        settings = cache_settings(self.backend(model_id).settings, self.run_id)
        return [cache_key(settings, r, grammar_version, by_seed) for r in requests]

    def outputs(
        self,
        model_id: str,
        requests: list[Request],
        use_cache: bool,
        label: str,
        grammar_version: int | None = GRAMMAR_VERSION,
        by_seed: bool = False,
    ) -> tuple[list[Output], list[bool]]:
        """Outputs of ``requests`` and whether each came from the cache. The cache key carries the
        docs/definitions.md §2 grammar version (facet cells, their cost pilot, the judge); envelope
        cells, which permute nothing, pass ``grammar_version=None``."""
        if not use_cache or self.cache is None:
            return self._call(model_id, requests, label), [False] * len(requests)
        keys = self.cache_keys(model_id, requests, grammar_version, by_seed)
        found = self.cache.get_many(keys)
        if len(found) < len(set(keys)):
            # one worker computes a call's misses; another asking for them waits, then finds
            # them cached
            with self.cache.claim(model_id, label):
                found = self.cache.get_many(keys)
                todo = {k: r for k, r in zip(keys, requests) if k not in found}
                if todo:
                    fresh = dict(
                        zip(todo, self._call(model_id, list(todo.values()), label, list(todo)))
                    )
                    found.update(fresh)
                    missed = set(todo)
                else:
                    missed = set()
        else:
            missed = set()
        return [found[k] for k in keys], [k not in missed for k in keys]

    def _call(
        self, name: str, requests: list[Request], label: str, keys: list[str] | None = None
    ) -> list[Output]:
        """Call model (or variant) ``name`` in batches (or, for a streaming API backend, all at
        once under its own concurrency limit); with ``keys``, cache outputs as they return so a
        failure or interruption loses nothing already computed."""
        outputs: list[Output] = []
        backend = self.backend(name)
        model_id = self.base_model(name)
        streaming = is_streaming(backend)
        step = max(1, len(requests) if streaming else backend.batch_size)
        with (
            tqdm(
                total=len(requests),
                desc=f"{backend.model_id} {label}",
                unit="call",
                disable=not self.progress,
                leave=False,
            ) as bar,
            self._in_flight(model_id, label, len(requests)) as note,
        ):
            for start in range(0, len(requests), step):
                chunk = requests[start : start + step]
                chunk_keys = (
                    keys[start : start + step]
                    if keys is not None and self.cache is not None
                    else None
                )
                pending: dict[str, Output] = {}

                def finished(i: int, out: Output) -> None:
                    bar.update(1)
                    if chunk_keys is not None:
                        pending[chunk_keys[i]] = out
                        if len(pending) >= 16:
                            note(len(pending))
                            self._flush(backend.model_id, pending)

                try:
                    done = (
                        backend.complete(chunk, on_output=finished)
                        if is_streaming(backend)
                        else backend.complete(chunk)
                    )
                except FlipgateError:
                    raise
                except Exception as exc:
                    raise FlipgateError(
                        f"model {backend.model_id!r}: backend call failed on {label} "
                        f"(trial {chunk[0].key}): {type(exc).__name__}: {exc}"
                    ) from exc
                finally:
                    self._flush(backend.model_id, pending)
                outputs.extend(done)
                if not streaming:
                    bar.update(len(chunk))
                    if chunk_keys is not None and self.cache is not None:
                        self.cache.put_many(backend.model_id, dict(zip(chunk_keys, done)))
                    note(len(chunk))
        self.model_calls[model_id] += len(requests)
        return outputs

    @contextmanager
    def _in_flight(self, model_id: str, label: str, total: int) -> Iterator[Callable[[int], None]]:
        """A call of ``total`` requests and its returned outputs, noted in the store from its
        start and as they come (the controller's live progress display names the longest call
        in flight), and cleared when the call ends, however it ends."""
        answered, started = 0, time.time()

        def note(n: int) -> None:
            nonlocal answered
            answered += n
            self.store.set_live(self.source, model_id, label, answered, total, started)

        try:
            note(0)
            yield note
        finally:
            self.store.set_live(self.source, model_id, label, None)

    def _flush(self, model_id: str, pending: dict[str, Output]) -> None:
        if pending and self.cache is not None:
            self.cache.put_many(model_id, dict(pending))
            pending.clear()
