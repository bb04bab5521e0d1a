"""Assemble GRID cards from the trials store (controller, at session end), atomically: typed
(:mod:`flipgate.cards.model`), written from the model and validated against the schema generated
from it."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import jsonschema

from flipgate import FlipgateError
from flipgate import metrics as M
from flipgate.analysis_cache import package_versions
from flipgate.cards.disclosure import card_section
from flipgate.cards.model import (
    SCHEMA_PATH,
    SCHEMA_VERSION,
    AxisReceipt,
    Calls,
    CardVerdict,
    DatasetInfo,
    Decoding,
    Estimate,
    FewShot,
    GridCard,
    MetricBlock,
    ModelInfo,
    RunInfo,
    Scope,
    Scores,
    ScoringPath,
    SequentialCell,
    Template,
)
from flipgate.cell import Cell
from flipgate.facets import FACETS, readouts_for
from flipgate.results import CellSummary, Verdict
from flipgate.sequential import SequentialStop
from flipgate.store import TrialStore
from flipgate.summary import answers_frame, control_summary, facet_summary

LIBRARIES = [
    "flipgate",
    "torch",
    "transformers",
    "datasets",
    "numpy",
    "pandas",
    "scipy",
    "pytest",
    "pytest-xdist",
    "allure-pytest",
    "jsonschema",
]
NOT_VARIED = [
    "prompt template (one template per facet; see template_sha256)",
    "decoding settings (see decoding)",
    "few-shot count (0)",
    "quantization / dtype",
    "label set (A, B, C, ...)",
    "system prompt (the model's chat template default)",
    "item sample (seed-42 shuffle; see dataset.sampling)",
]


def validate_card(card: dict) -> None:
    """Raise jsonschema.ValidationError if ``card`` (JSON data) does not match the shipped schema
    (generated from :class:`~flipgate.cards.model.GridCard`)."""
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(card)


def library_versions() -> dict[str, str | None]:
    return package_versions(LIBRARIES)


def git_commit(cwd: Path | None = None) -> str | None:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
                cwd=cwd,
                timeout=10,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _identity(fingerprint: dict, root: Path | None) -> dict[str, Any]:
    """The axis receipt's model identity (from the backend's fingerprint) and software versions."""
    return {
        "dtype": fingerprint.get("dtype"),
        "dtype_choice": fingerprint.get("dtype_choice"),
        "engine": fingerprint.get("engine"),
        "server": fingerprint.get("server"),
        "weights_sha256": fingerprint.get("weights_sha256", "unknown"),
        "model_revision": fingerprint.get("revision"),
        "tokenizer_sha256": fingerprint.get("tokenizer_sha256"),
        "chat_template_sha256": fingerprint.get("chat_template_sha256"),
        "library_versions": library_versions(),
        "git_commit": git_commit(root),
    }


def threshold_entry(v: Verdict) -> CardVerdict:
    """A verdict as the card lists it: with its BH ``q_value`` (None until
    :meth:`TrialStore.adjust_q_values` has run, or without a p-value)."""
    return CardVerdict.model_validate({**v.model_dump(), "q_value": v.q_value})


@dataclass(frozen=True)
class CardContext:
    """What a suite gets to fill its part of the card of ``model_id`` on ``dataset``
    (:class:`TypedCardSuite`): the store, every trial of the pair (the suites' cells
    included), the store's entry of the model (its ``fingerprint`` and models.yaml ``config``) and
    the run's bootstrap settings; :meth:`suite_card` builds the card of a dataset that one suite
    alone audited."""

    store: TrialStore
    model_id: str
    dataset: str
    run_id: str
    trials: Any  # pandas.DataFrame of TrialStore.trials
    model: dict
    root: Path | None = None
    n_boot: int = 1000
    level: float = 0.95
    seed: int = 42

    def suite_card(
        self,
        *,
        n_items: int,
        sampling: str,
        receipt: dict[str, Any],
        scores: Scores,
        scope: Scope,
        **sections: Any,
    ) -> GridCard:
        """The card of a dataset that one suite alone audited (its ``own_card``): what every card
        holds (model, dataset, run, the receipt with the model's identity, the threshold
        verdicts), around the suite's receipt, score, scope and ``sections``; checked against the
        schema."""
        fp = self.model["fingerprint"]
        card = GridCard(
            schema_version=SCHEMA_VERSION,
            model=ModelInfo(
                id=self.model_id, backend=fp.get("backend", "?"), source=fp.get("source")
            ),
            dataset=DatasetInfo(name=self.dataset, n_items=n_items, sampling=sampling, screens={}),
            run=_run_info(self.store, self.model_id, self.run_id),
            axis_receipt=AxisReceipt(**receipt, **_identity(fp, self.root)),
            scores=scores,
            order_robustness={},
            controls={},
            thresholds=[
                threshold_entry(v) for v in self.store.verdicts(self.model_id, self.dataset)
            ],
            scope=scope,
            **sections,
        )
        validate_card(card.to_data())
        return card

    def plain_receipt(
        self,
        template_id: str,
        template_sha256: str | None,
        templates: dict[str, Template],
        scoring_path: ScoringPath,
        manifest_sha256: dict[str, str],
    ) -> dict[str, Any]:
        """A suite card's receipt for a model run as models.yaml configures it: its decoding, no
        few-shot exemplars, no envelope rules."""
        return dict(
            template_id=template_id,
            template_sha256=template_sha256,
            templates=templates,
            decoding=_decoding(self.model["config"]),
            few_shot=FewShot(count=0, exemplar_ids=[]),
            scoring_path=scoring_path,
            quantization=self.model["fingerprint"].get("quantization"),
            manifest_sha256=manifest_sha256,
            envelope_rules_sha256=None,
        )


@runtime_checkable
class TypedCardSuite(Protocol):
    """What flipgate's own suites give the GRID cards besides the generic ``suites`` section
    of :class:`flipgate.suite_api.Suite`: their sections are typed fields of
    :class:`~flipgate.cards.model.GridCard` (its checked-in schema names them), so only they give
    these members, and a suite from another package, which cannot add a typed field, need not
    (flipgate.cards builds with what a suite that is one gives, and skips one that is not).
    flipgate/suite_base.py's ``TypedCardSection`` holds the defaults: no cells, fields, card,
    lines or pages."""

    #: where its card comes in the search for the card of a dataset no facet or control cell ran
    #: on (:meth:`own_card`): lower first
    own_card_rank: int

    def owns_cell(self, cell: str) -> bool:
        """True for a trials-store cell (``facet`` column) that it records: not a facet cell of
        the card."""
        ...

    def card_fields(self, ctx: CardContext) -> dict[str, Any]:
        """The GridCard fields it fills on the card of ``ctx.model_id`` on ``ctx.dataset`` (e.g.
        ``{"judge_consensus": JudgeConsensusSection}``), and any axis-receipt fields (e.g.
        ``envelope_rules_sha256``); empty where it has none."""
        ...

    def own_card(self, ctx: CardContext, sections: dict[str, Any]) -> GridCard | None:
        """The card of a dataset that no facet or control cell ran on, where it audited it (built
        with :meth:`CardContext.suite_card`), else None; ``sections`` are the GridCard fields every
        suite's :meth:`card_fields` gave the card."""
        ...

    def card_fields_markdown(self, card: dict) -> list[str]:
        """The Markdown lines of its typed sections of ``card`` (JSON data); none where the card
        has none."""
        ...

    def model_pages(
        self, store: TrialStore, model_id: str, run_id: str, level: float
    ) -> dict[str, str]:
        """Pages it writes next to a model's cards: file name in ``grid_cards/<model>/`` -> text."""
        ...

    def model_index_metrics(self, card: dict) -> list[dict]:
        """Its headline metrics of ``card`` (JSON data) for the model's Hugging Face
        ``model-index`` (``type``, ``name``, ``value``); none where the card has no section."""
        ...

    def own_card_label(self, card: dict) -> str | None:
        """How the model card's table names the row of a card of its own (Markdown); None
        where ``card`` is not one."""
        ...

    def model_card_lines(self, cards: list[dict]) -> list[str]:
        """Its Markdown lines in the flipgate section of a Hugging Face model card
        (``python -m flipgate card``), from the model's cards (JSON data)."""
        ...


class NoCard(FlipgateError):
    """A (model, dataset) with trials in the store but nothing to build its card from: only a
    suite's cells ran on it and none recorded its result (a cell that was interrupted or failed
    part-way)."""


def build_card(
    store: TrialStore,
    model_id: str,
    dataset: str,
    run_id: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
    root: Path | None = None,
    suites: Sequence[Any] = (),
) -> GridCard:
    """The card of ``model_id`` on ``dataset``: a facet card with the typed sections ``suites``
    (the registered suites, flipgate.registry.suites(); each a :class:`TypedCardSuite` or
    not) fill, or, where no facet or control cell ran on it, the card of the suite that alone
    audited it (:meth:`TypedCardSuite.own_card`, lowest ``own_card_rank`` first); checked against
    the shipped schema. The suites' cells (:meth:`TypedCardSuite.owns_cell`) are not facet cells.
    Raises :class:`NoCard` where only a suite's cells ran on the pair and none finished."""
    typed = [s for s in suites if isinstance(s, TypedCardSuite)]
    everything = store.trials(model_id=model_id, dataset=dataset)
    theirs = [c for c in everything["facet"].unique() if any(s.owns_cell(c) for s in typed)]
    trials = everything[~everything["facet"].isin(theirs)]
    model = store.models().get(model_id, {"fingerprint": {}, "config": {}})
    fp, cfg = model["fingerprint"], model["config"]
    ctx = CardContext(
        store, model_id, dataset, run_id, everything, model, root, n_boot, level, seed
    )
    fields: dict[str, Any] = {}
    for suite in typed:
        fields |= suite.card_fields(ctx)
    receipt = {"envelope_rules_sha256": None} | {
        k: v for k, v in fields.items() if k in AxisReceipt.model_fields
    }
    sections = {k: v for k, v in fields.items() if k not in AxisReceipt.model_fields}
    model_readouts = cfg.get("readouts", ["letter_logprob"])
    model_primary = cfg.get("primary_readout", model_readouts[0])
    order: dict[str, dict[str, MetricBlock]] = {}
    controls: dict[str, dict[str, MetricBlock]] = {}
    primaries: dict[str, str] = {}
    # each cell's summaries as its test computed, asserted and reported them; a cell whose test
    # did not run (trials only asked for by a control or the ODI fit) is summarised here
    stored = store.cell_summaries(model_id, dataset)
    for cell in sorted(trials["facet"].unique()):
        parsed = Cell.parse(cell)
        control, facet = parsed.control, parsed.facet
        readouts, primaries[facet] = readouts_for(facet, model_readouts, model_primary)
        part = trials[trials["facet"] == cell]
        perm = trials[trials["facet"] == facet]
        judged = control is None and FACETS[facet].judged
        judgements = store.judgements(model_id, dataset, cell) if judged else None

        def summarise(readout: str) -> CellSummary:
            if control is None or not len(perm):
                return facet_summary(part, readout, n_boot, level, seed, judgements)[0]
            return control_summary(perm, part, readout, n_boot, level, seed)[0]

        summaries = {
            r: MetricBlock.model_validate(
                (stored.get(cell, {}).get(r) or summarise(r)).model_dump(mode="json")
            )
            for r in readouts
        }
        (order if control is None else controls)[cell] = summaries
    if not order and not controls:  # a dataset that one suite alone audited
        for suite in sorted(typed, key=lambda s: s.own_card_rank):
            own = suite.own_card(ctx, sections)
            if own is not None:
                return own
        raise NoCard(
            f"{model_id}/{dataset}: only a suite's cells ran on it, and none of them recorded a "
            f"result (its record or analysis is missing from {store.path}: the cell did not finish)"
        )
    main = sorted(order)[0] if order else Cell.parse(sorted(controls)[0]).facet
    primary = primaries[main]
    scored = trials[trials["facet"] == main]
    df = answers_frame(scored, primary) if len(scored) else scored.assign(correct=[])
    canon = df[df["condition"] == 0] if len(df) else df
    to_float = lambda s: s.map(lambda c: float("nan") if c is None else float(c))  # noqa: E731
    acc_canon = (
        M.bootstrap_ci(
            to_float(canon["correct"]), cluster=canon["item_id"], n=n_boot, level=level, seed=seed
        )
        if len(canon)
        else (float("nan"),) * 3
    )
    acc_all = (
        M.bootstrap_ci(
            to_float(df["correct"]), cluster=df["item_id"], n=n_boot, level=level, seed=seed
        )
        if len(df)
        else (float("nan"),) * 3
    )
    manifests = {f: m["sha256"] for (f, d), m in store.manifests().items() if d == dataset}
    template = FACETS[main]
    templates = {
        f: Template(id=FACETS[f].template_id, sha256=FACETS[f].template_sha256) for f in primaries
    }
    card = GridCard(
        schema_version=SCHEMA_VERSION,
        model=ModelInfo(
            id=model_id,
            backend=fp.get("backend", cfg.get("backend", "?")),
            source=fp.get("source"),
        ),
        dataset=DatasetInfo.model_validate(
            {
                "name": dataset,
                "n_items": int(trials["item_id"].nunique()),
                "sampling": f"seed-{seed} uniform shuffle, facet filter, first N",
                "screens": store.screens(dataset),
            }
        ),
        run=_run_info(store, model_id, run_id),
        axis_receipt=AxisReceipt(
            template_id=template.template_id,
            template_sha256=template.template_sha256,
            templates=templates,
            decoding=_decoding(cfg),
            few_shot=FewShot(count=0, exemplar_ids=[]),
            scoring_path=ScoringPath(
                primary_readout=primaries,
                readouts=model_readouts,
                map_back={f: FACETS[f].scoring for f in primaries},
            ),
            quantization=fp.get("quantization"),
            manifest_sha256=manifests,
            **_identity(fp, root),
            **receipt,
        ),
        scores=Scores(
            facet=main,
            primary_readout=primary,
            accuracy_canonical=Estimate(estimate=acc_canon[0], ci=(acc_canon[1], acc_canon[2])),
            accuracy_all_orderings=Estimate(estimate=acc_all[0], ci=(acc_all[1], acc_all[2])),
        ),
        order_robustness=order,
        controls=controls,
        thresholds=[threshold_entry(v) for v in store.verdicts(model_id, dataset)],
        scope=Scope(
            varied=[
                f"{f} (K={next(iter(order[f].values())).k} orderings per item, "
                "docs/definitions.md §2 grammar)"
                for f in order
            ]
            + [f"{c}: canonical ordering repeated K times with fresh seeds" for c in controls],
            not_varied=NOT_VARIED,
        ),
        sequential=_sequential(store, model_id, dataset, level, {*order, *controls}),
        **sections,
    )
    validate_card(card.to_data())
    return card


def _sequential(
    store: TrialStore, model_id: str, dataset: str, level: float, cells: set[str]
) -> dict[str, SequentialCell] | None:
    """Where each of ``cells`` that ran sequentially stopped (docs/definitions.md §12); None at
    fixed N, so the card has no ``sequential`` section."""
    stops = {
        s.cell: card_section(s, level)
        for s in store.records(SequentialStop, model_id)
        if s.dataset == dataset and s.cell in cells
    }
    return stops or None


def _decoding(model: dict) -> Decoding:
    """The card's decoding receipt from a models.yaml entry."""
    decoding = model.get("decoding") or {}
    return Decoding(
        temperature=decoding.get("temperature", 0.0),
        top_p=decoding.get("top_p", 1.0),
        max_new_tokens=model.get("max_new_tokens"),
        greedy=not decoding.get("temperature"),
    )


def _run_info(store: TrialStore, model_id: str, run_id: str) -> RunInfo:
    """The run, with the model's API calls (requests, retries, timeouts, failures) where it made
    any, and why it was interrupted where it was (the card is then partial)."""
    calls = store.calls().get(model_id)
    return RunInfo(
        run_id=run_id,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        trials_store=str(store.path),
        calls=Calls.model_validate(calls) if calls else None,
        interrupted=store.interruption(),
    )
