"""The core's model calls: one process's :class:`Auditor` loads each model once, answers requests
through the response cache (one worker computes a miss, another waits for it), records each call
in flight for the live display and the calls each model took, and holds the run's settings, its
trials store and each model's thresholds. What a facet cell asks is :mod:`flipgate.facet_plan`'s;
how the order suite measures its cells, flipgate.order.measure's."""

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

from tqdm import tqdm

from flipgate import FlipgateError
from flipgate.backends import Backend, Output, Request, create_backend
from flipgate.backends.base import is_streaming
from flipgate.backends.identity import cache_settings
from flipgate.cache import ResponseCache, cache_key
from flipgate.config import AuditConfig, ThresholdSet, load_thresholds
from flipgate.facet_plan import FacetPlans
from flipgate.facets import readouts_for
from flipgate.gate.sequential import Dependent
from flipgate.grammar import GRAMMAR_VERSION
from flipgate.hashing import sha256_json
from flipgate.results import Trial
from flipgate.store import TrialStore

log = logging.getLogger("flipgate")
#: outputs of a streaming call between two notes of its progress (answered, requests in the
#: air) and flushes of its cache: often enough for a live line, rarely enough to cost nothing
NOTE_EVERY = 16


@dataclass
class Paths:
    store: Path  # reports/runs/<run_id>/trials.sqlite
    cache: Path | None  # response cache sqlite, None = --no-cache
    manifests: Path  # fixtures/manifests
    models: Path  # dequantised model cache


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
        #: --allow-ungated: a cell no threshold can fail is skipped with the reason, not failed
        self.allow_ungated = allow_ungated
        #: the thresholds a sequential cell stops on (None: every cell spends its cap)
        self.thresholds_dir = thresholds_dir
        #: sequential gates (docs/definitions.md §12); None: fixed N (``--fixed-n`` or
        #: ``audit.sequential: false``)
        self.sequential = None if fixed_n else config.sequential
        #: the suites' dependents of a facet cell (flipgate.gate.sequential.Dependent), e.g. the
        #: regression cases that compare it: ``source(model_id, dataset, cell)``; set by the
        #: session (docs/definitions.md §12.4)
        self.dependent_sources: list[Callable[[str, str, str], list[Dependent]]] = []
        self.store = TrialStore(paths.store)
        self.source = os.environ.get("PYTEST_XDIST_WORKER", "main")  # this process, in the store
        self.cache = ResponseCache(paths.cache) if paths.cache else None
        self._backends: dict[str, Backend] = {}
        self._variants: dict[str, dict[str, Any]] = {}
        #: what each facet or control cell asks (its items, orderings, plan and requests);
        #: ``control_salt`` (--fresh-controls): control replicates drawn with new seeds (this run's
        #: id as salt), so their cache keys are new and the noise floor is measured again
        #: (docs/definitions.md §3.6)
        self.plans = FacetPlans(
            config, self.store, paths.manifests, items_per_dataset, control_salt
        )
        self._memo: dict[str, Any] = {}
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

    def memo(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()``, made once per auditor (this process) and ``key``: state a suite keeps per
        process, e.g. its cells' measurements (flipgate.order.measure)."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

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

    # -- what a trial records ------------------------------------------------------------------
    def readouts(self, model_id: str, facet_name: str) -> tuple[list[str], str]:
        """(readouts, primary readout) of a model on a facet."""
        model = self.model(model_id)
        return readouts_for(facet_name, model["readouts"], model["primary_readout"])

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

    # -- calls ---------------------------------------------------------------------------------
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
                unnoted = 0

                def finished(i: int, out: Output) -> None:
                    nonlocal unnoted
                    bar.update(1)
                    unnoted += 1
                    if chunk_keys is not None:
                        pending[chunk_keys[i]] = out
                    if unnoted >= NOTE_EVERY:
                        flying = getattr(backend, "mean_in_flight", None)
                        note(unnoted, flying() if flying is not None else None)
                        unnoted = 0
                        self._flush(backend.model_id, pending)

                def waiting(reason: str, since: float) -> None:
                    self.store.set_wait(self.source, model_id, label, reason, since)

                try:
                    done = (
                        backend.complete(chunk, on_output=finished, on_wait=waiting)
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
                    note(len(chunk), None)
        self.model_calls[model_id] += len(requests)
        return outputs

    @contextmanager
    def _in_flight(
        self, model_id: str, label: str, total: int
    ) -> Iterator[Callable[[int, float | None], None]]:
        """A call of ``total`` requests and its returned outputs, noted in the store from its
        start and every :data:`NOTE_EVERY` outputs with the mean number of its requests in the
        air (an API backend's: the progress line shows it), and cleared when the call ends,
        however it ends."""
        answered, started = 0, time.time()

        def note(n: int, in_flight: float | None = None) -> None:
            nonlocal answered
            answered += n
            self.store.set_live(self.source, model_id, label, answered, total, started, in_flight)

        try:
            note(0)
            yield note
        finally:
            self.store.set_live(self.source, model_id, label, None)

    def _flush(self, model_id: str, pending: dict[str, Output]) -> None:
        if pending and self.cache is not None:
            self.cache.put_many(model_id, dict(pending))
            pending.clear()
