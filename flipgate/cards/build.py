"""Assemble GRID cards from the trials store (controller, at session end), atomically: typed
(:mod:`flipgate.cards.model`), written from the model and validated against the schema generated
from it."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import jsonschema

from flipgate import FlipgateError
from flipgate.analysis_cache import package_versions
from flipgate.backends.source import public_path
from flipgate.cards.model import (
    SCHEMA_PATH,
    SCHEMA_VERSION,
    AxisReceipt,
    Calls,
    CardVerdict,
    DatasetInfo,
    Decoding,
    FewShot,
    GridCard,
    ModelInfo,
    RunInfo,
    Scope,
    Scores,
    ScoringPath,
    Template,
)
from flipgate.results import Verdict
from flipgate.store import TrialStore

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


def identity_fields(fingerprint: dict, root: Path | None) -> dict[str, Any]:
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
    other than the order suite audited."""

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
    #: the axis-receipt fields the suites gave (:meth:`TypedCardSuite.card_fields`), for the card
    #: :meth:`TypedCardSuite.own_card` builds (set once every suite has given its fields)
    receipt: dict[str, Any] = field(default_factory=dict)

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
            run=run_info(self.store, self.model_id, self.run_id),
            axis_receipt=AxisReceipt(**receipt, **identity_fields(fp, self.root)),
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
            decoding=decoding_receipt(self.model["config"]),
            few_shot=FewShot(count=0, exemplar_ids=[]),
            scoring_path=scoring_path,
            quantization=self.model["fingerprint"].get("quantization"),
            manifest_sha256=manifest_sha256,
            envelope_rules_sha256=None,
        )


@runtime_checkable
class TypedCardSuite(Protocol):
    """What flipgate's own suites give the GRID cards besides the generic ``suites`` section
    of :class:`flipgate.suite.api.Suite`: their sections are typed fields of
    :class:`~flipgate.cards.model.GridCard` (its checked-in schema names them), so only they give
    these members, and a suite from another package, which cannot add a typed field, need not
    (flipgate.cards builds with what a suite that is one gives, and skips one that is not).
    flipgate/suite/builtin.py's ``TypedCardSection`` holds the defaults: no fields, card, lines
    or pages."""

    #: where its card comes in the search for a dataset's card (:meth:`own_card`): lower first;
    #: the order suite's facet card is the first
    own_card_rank: int

    def card_fields(self, ctx: CardContext) -> dict[str, Any]:
        """The GridCard fields it fills on the card of ``ctx.model_id`` on ``ctx.dataset`` (e.g.
        ``{"judge_consensus": JudgeConsensusSection}``), and any axis-receipt fields (e.g.
        ``envelope_rules_sha256``); empty where it has none."""
        ...

    def own_card(self, ctx: CardContext, sections: dict[str, Any]) -> GridCard | None:
        """Its card of ``ctx.dataset`` where it audited it, else None: the order suite's facet
        card where a facet or control cell ran on the pair, another suite's built with
        :meth:`CardContext.suite_card`; ``sections`` are the GridCard fields every suite's
        :meth:`card_fields` gave the card."""
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
    """The card of ``model_id`` on ``dataset``: the own card (:meth:`TypedCardSuite.own_card`,
    lowest ``own_card_rank`` first) of the first of ``suites`` (the registered suites,
    flipgate.registry.suites(); each a :class:`TypedCardSuite` or not) that audited the pair —
    the order suite's facet card where a facet or control cell ran on it — with the typed
    sections every suite fills; checked against the shipped schema. Raises :class:`NoCard` where
    none of them has a card (only a suite's cells ran on the pair and none finished)."""
    typed = [s for s in suites if isinstance(s, TypedCardSuite)]
    model = store.models().get(model_id, {"fingerprint": {}, "config": {}})
    everything = store.trials(model_id=model_id, dataset=dataset)
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
    ctx = replace(ctx, receipt=receipt)
    for suite in sorted(typed, key=lambda s: s.own_card_rank):
        own = suite.own_card(ctx, sections)
        if own is not None:
            return own
    raise NoCard(
        f"{model_id}/{dataset}: only a suite's cells ran on it, and none of them recorded a "
        f"result (its record or analysis is missing from {store.path}: the cell did not finish)"
    )


def decoding_receipt(model: dict) -> Decoding:
    """The card's decoding receipt from a models.yaml entry."""
    decoding = model.get("decoding") or {}
    return Decoding(
        temperature=decoding.get("temperature", 0.0),
        top_p=decoding.get("top_p", 1.0),
        max_new_tokens=model.get("max_new_tokens"),
        greedy=not decoding.get("temperature"),
    )


def run_info(store: TrialStore, model_id: str, run_id: str) -> RunInfo:
    """The run, with the model's API calls (requests, retries, timeouts, failures) where it made
    any, and why it was interrupted where it was (the card is then partial)."""
    calls = store.calls().get(model_id)
    return RunInfo(
        run_id=run_id,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        trials_store=public_path(store.path),  # relative to the project, never a folder outside
        calls=Calls.model_validate(calls) if calls else None,
        interrupted=store.interruption(),
    )
