"""Assemble GRID cards from the trials store (controller, at session end), atomically: typed
(:mod:`flipgate.cards.model`), written from the model and validated against the schema generated
from it."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from flipgate import FlipgateError, storage
from flipgate import metrics as M
from flipgate.analysis_cache import package_versions
from flipgate.cards.disclosure import card_section, interval_text, labelled_intervals, stop_line
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
from flipgate.gate import SEQUENCE
from flipgate.markdown_text import md_escape
from flipgate.results import CellSummary, Verdict
from flipgate.sequential import SequentialStop
from flipgate.store import TrialStore
from flipgate.suite_api import TypedCardSuite
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
#: how an interrupted run's card (``run.interrupted``) names itself, and each of its verdicts
PARTIAL = "interrupted run, partial card"
PARTIAL_WHY = (
    "its cells and threshold verdicts are those of the cells that finished before the run "
    "stopped (or a cell's trials so far), not the audit's verdict"
)
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
    (flipgate.suite_api.TypedCardSuite): the store, every trial of the pair (the suites' cells
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
    (the registered suites, flipgate.registry.suites(); each a flipgate.suite_api.TypedCardSuite
    or not) fill, or, where no facet or control cell ran on it, the card of the suite that alone
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


def num(x) -> str:
    """A number as the cards print it (3 decimals), – where it is missing or NaN."""
    return "–" if x is None or x != x else f"{x:.3f}"


def ci_text(verdict: dict) -> str:
    """A verdict's interval as ``[lo, hi]`` with the level it was computed at, or – where it has
    none."""
    return interval_text(verdict.get("ci"), verdict.get("level"))


def verdict_interval(card: dict, verdict: dict) -> str:
    """A threshold verdict's interval on ``card`` (JSON data): its CI (:func:`ci_text`), or, for
    a sequential cell, the confidence sequence and, labelled apart, the fixed-N bootstrap CI of
    the same metric and readout from the cell's metrics; both shown, the deciding test is the
    verdict's ``test`` (docs/definitions.md §12.6)."""
    if verdict.get("interval") != SEQUENCE:
        return ci_text(verdict)
    cell = verdict.get("facet") or ""
    metrics = (card["order_robustness"].get(cell) or card["controls"].get(cell) or {}).get(
        verdict.get("readout") or "", {}
    )
    bootstrap = (metrics.get(verdict["metric"]) or {}).get("ci")
    level = card.get("sequential", {}).get(cell, {}).get("bootstrap_level")
    return labelled_intervals(verdict.get("ci"), verdict.get("level"), bootstrap, level)


def verdict_text(v: dict) -> str:
    """The label, and what the gate did with it where that differs (docs/thresholds.md):
    e.g. "**inconclusive** → fail" for an unproven ``upper`` bound."""
    label, outcome = v["verdict"], v.get("outcome")
    return f"**{md_escape(label)}**" + (
        f" → {md_escape(outcome)}" if outcome and outcome != label else ""
    )


def fmt_estimate(m: dict | None) -> str:
    """An estimate (JSON data) as the cards print it: the value and its CI, – where it has none."""
    if m is None or m["estimate"] is None:
        return "–"
    ci = m.get("ci")
    tail = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and ci[0] is not None else ""
    return f"{m['estimate']:.3f}{tail}"


def card_markdown(card: dict, suites: Sequence[Any] = ()) -> str:
    """The card (JSON data) as Markdown; each of ``suites`` (the registered suites, in their
    order) that is a flipgate.suite_api.TypedCardSuite adds the lines of its typed sections."""
    r = card["axis_receipt"]
    fmt = fmt_estimate
    # every string below that came from models.yaml, thresholds, envelopes or the store
    esc = md_escape
    lines = [
        f"# GRID card: {esc(card['model']['id'])} on {esc(card['dataset']['name'])}",
        "",
        f"Run {esc(card['run']['run_id'])}, {esc(card['run']['created'])}; N = "
        f"{card['dataset']['n_items']} items "
        f"({esc(card['dataset']['sampling'])}).",
    ]
    interrupted = card["run"].get("interrupted")
    if interrupted:
        lines += ["", f"**{PARTIAL}** ({esc(interrupted)}): {PARTIAL_WHY}.", ""]
    lines += [
        f"Position-reference screen ({esc(f)}): {s['excluded']} of {s['considered']} items "
        "excluded, "
        f"{s['kept']} kept."
        for f, s in card["dataset"].get("screens", {}).items()
    ]
    calls = card["run"].get("calls")
    if calls:
        lines.append(
            f"API calls: {calls['requests']} requests, {calls['retries']} retries, "
            f"{calls['timeouts']} "
            f"timeouts, {calls.get('failures', 0)} failed."
        )
    lines += [
        "",
        "## Axis receipt",
        "",
        "| field | value |",
        "|---|---|",
        f"| backend | {esc(card['model'].get('backend'))} |",
        f"| source | {esc(card['model'].get('source'))} |",
    ]
    for key in (
        "template_id",
        "template_sha256",
        "weights_sha256",
        "tokenizer_sha256",
        "chat_template_sha256",
        "quantization",
        "dtype",
        "model_revision",
        "git_commit",
    ):
        lines.append(f"| {key} | {esc(r.get(key))} |")
    if r.get("dtype_choice"):  # a local model's: declared, or auto by the hardware
        lines.append(f"| dtype chosen | {esc(r['dtype_choice'])} |")
    lines += [
        f"| decoding | {esc(json.dumps(r['decoding']))} |",
        f"| scoring path | {esc(json.dumps(r['scoring_path']))} |",
        f"| manifests | {esc(json.dumps(r['manifest_sha256']))} |",
        "",
        "## Scores",
        "",
        f"Facet {esc(card['scores']['facet'])}, primary readout "
        f"{esc(card['scores']['primary_readout'])}.",
        "",
        f"- accuracy (canonical ordering): {fmt(card['scores']['accuracy_canonical'])}",
        f"- accuracy (all orderings): {fmt(card['scores']['accuracy_all_orderings'])}",
        "",
        "## Order robustness",
        "",
        "| facet | readout | N | K | flip rate | OSI | pairwise disagr. | parse rate | accuracy | "
        "acc swing | Δ_order |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for group in ("order_robustness", "controls"):
        for facet, by_readout in card[group].items():
            for readout, m in by_readout.items():
                lines.append(
                    f"| {esc(facet)} | {esc(readout)} | {m['n_items']} | {m['k']} | "
                    f"{fmt(m['flip_rate'])} | {fmt(m['osi'])} "
                    f"| {fmt(m['pairwise_disagreement'])} | {fmt(m['parse_rate'])} | "
                    f"{fmt(m['accuracy'])} "
                    f"| {fmt(m['acc_swing'])} | {fmt(m.get('delta_order'))}"
                    + (f" (floor {esc(m['floor'])})" if m.get("floor") else "")
                    + " |"
                )
    unmeasured = [
        c for c, by in card["controls"].items() if any(m.get("floor") for m in by.values())
    ]
    if unmeasured:  # docs/definitions.md §12.5
        lines += [
            "",
            f"Floor not measured ({', '.join(map(esc, unmeasured))}): the backend answered the K "
            "replicates as copies of one computation, so the control's flip rate is 0 by "
            "construction, its thresholds are not applicable and Δ_order is the facet's flip rate "
            "against that floor (docs/suites/order.md).",
        ]
    for facet, by_readout in card["order_robustness"].items():
        primary = card["axis_receipt"]["scoring_path"]["primary_readout"].get(facet)
        m = by_readout.get(primary) or next(iter(by_readout.values()))
        if not m.get("k_policies"):
            continue
        lines += [
            "",
            f"### K-policies: {esc(facet)} ({esc(primary)})",
            "",
            f"K=2 screen recall against K={m['k']} flip: {num(m.get('k2_screen_recall'))}; "
            "flip rate by K: "
            + ", ".join(f"K={k}: {num(v)}" for k, v in m["k_ablation"].items())
            + ".",
            "",
            "| policy | cost (calls/item) | accuracy | selective accuracy | coverage |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {esc(r['policy'])} | {r['cost']} | {num(r['accuracy'])} | "
            f"{num(r['selective_accuracy'])} "
            f"| {num(r['coverage'])} |"
            for r in m["k_policies"]
        ]
    for suite in suites:
        if isinstance(suite, TypedCardSuite):
            lines += suite.card_fields_markdown(card)
    lines += [
        "",
        "## Threshold verdicts",
        "",
        "| cell | threshold | estimate | CI | deciding test | p | BH q | verdict | why |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in card["thresholds"]:
        lines.append(
            f"| {esc(v.get('facet', ''))} | {esc(v['threshold'])} | {num(v.get('estimate'))} | "
            f"{verdict_interval(card, v)} | {esc(v.get('test') or '–')} "
            f"| {num(v.get('p_value'))} | {num(v.get('q_value'))} | {verdict_text(v)}"
            f"{' (' + PARTIAL + ')' if interrupted else ''} "
            f"| {esc(v.get('why') or '')} |"
        )
    if card.get("sequential"):
        lines += [
            "",
            "## Sequential gates",
            "",
            "Items drawn in batches until every threshold its one-sided tests decide was "
            "decided or could no longer be decided, or the cap (docs/definitions.md §12):",
            "",
        ]
        lines += [
            f"- {stop_line(cell, SequentialCell.model_validate(stop), esc)}"
            for cell, stop in card["sequential"].items()
        ]
    lines += [
        "",
        "## Scope",
        "",
        "Varied: " + "; ".join(map(esc, card["scope"]["varied"])) + ".",
        "",
        "Not varied: " + "; ".join(map(esc, card["scope"]["not_varied"])) + ".",
        "",
    ]
    return "\n".join(lines)


def model_index(model_id: str, cards: list[dict], suites: Sequence[Any] = ()) -> dict:
    """A Hugging Face ``model-index`` block with each card's facet metrics, and the headline
    metrics of the suites' sections (``TypedCardSuite.model_index_metrics``)."""
    results = []
    for card in cards:
        primaries = card["axis_receipt"]["scoring_path"]["primary_readout"]
        metrics = [
            {
                "type": "accuracy",
                "name": "accuracy (canonical ordering)",
                "value": card["scores"]["accuracy_canonical"]["estimate"],
            }
        ]
        for group in ("order_robustness", "controls"):
            for facet, by_readout in card[group].items():
                m = by_readout.get(primaries.get(Cell.parse(facet).facet)) or next(
                    iter(by_readout.values())
                )
                metrics.append(
                    {
                        "type": "flip_rate",
                        "name": f"{facet} flip rate (K={m['k']})",
                        "value": m["flip_rate"]["estimate"],
                    }
                )
        for suite in suites:
            if isinstance(suite, TypedCardSuite):
                metrics += suite.model_index_metrics(card)
        results.append(
            {
                "task": {"type": "multiple-choice", "name": "ordering robustness"},
                "dataset": {"name": card["dataset"]["name"], "type": card["dataset"]["name"]},
                "metrics": [m for m in metrics if m["value"] is not None],
            }
        )
    return {"model-index": [{"name": model_id, "results": results}]}


class StaleCardWarning(UserWarning):
    """A card JSON on disk that cannot enter its model's model-index.yaml (unreadable or not
    schema-valid)."""


def cards_on_disk(model_dir: Path, model_id: str) -> list[dict]:
    """Every valid card of ``model_id`` under ``model_dir`` (this run's and earlier runs'), by
    dataset name; a file that does not parse or validate is skipped with a StaleCardWarning."""
    cards = []
    for path in sorted(Path(model_dir).rglob("*.json")):
        try:
            card = json.loads(path.read_text())
            validate_card(card)
        except (OSError, ValueError, jsonschema.ValidationError) as exc:
            reason = (
                exc.message
                if isinstance(exc, jsonschema.ValidationError)
                else f"{type(exc).__name__}: {exc}"
            )
            warnings.warn(
                f"flipgate: {path} left out of model-index.yaml: {reason}",
                StaleCardWarning,
                stacklevel=2,
            )
            continue
        if (
            card["model"]["id"] == model_id
        ):  # a nested model id's directory (org/model) is not this model's
            cards.append(card)
    return sorted(cards, key=lambda c: c["dataset"]["name"])


@dataclass(frozen=True)
class WrittenCard:
    """A card this run built, and the two files it was written to."""

    card: GridCard
    json_path: Path
    markdown_path: Path


@dataclass
class WrittenCards:
    """What :func:`write_cards` wrote: the cards (as built, for the Allure results and the
    terminal) and every file, model indexes and regression pages included."""

    cards: list[WrittenCard] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    #: the (model, dataset) pairs with trials but no card (:class:`NoCard`), one line each
    missing: list[str] = field(default_factory=list)


def write_cards(
    store: TrialStore,
    out_dir: Path,
    run_id: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
    root: Path | None = None,
    suites: Sequence[Any] = (),
) -> WrittenCards:
    """One card (JSON + MD) per (model, dataset) in the store, plus model-index.yaml per model. The
    index is rebuilt from every card on disk in the model's directory, so a partial run (``-k arc``)
    keeps the datasets it did not audit; it returns what this run wrote. ``suites`` are the
    registered suites (flipgate.registry.suites()): flipgate's own fill their typed card fields
    and write their pages next to a model's cards (flipgate.suite_api.TypedCardSuite); every suite
    adds its section to the cards it has one for (the card's ``suites``). A pair with no card to
    build (:class:`NoCard`: a suite's cell that did not finish) is listed in ``missing``, and the
    other pairs' cards are written."""
    pairs = store.conn.execute(
        "SELECT DISTINCT model_id, dataset FROM trials ORDER BY 1, 2"
    ).fetchall()
    written = WrittenCards()
    store.adjust_q_values()
    for model_id, dataset in pairs:
        try:
            card = build_card(store, model_id, dataset, run_id, n_boot, level, seed, root, suites)
        except NoCard as exc:
            written.missing.append(str(exc))
            continue
        markdown = card_markdown(card.to_data(), suites)
        sections = {s: s.card_section(store, model_id, dataset) for s in suites}
        sections = {s: section for s, section in sections.items() if section is not None}
        if sections:
            card = card.model_copy(update={"suites": {s.name: x for s, x in sections.items()}})
            validate_card(card.to_data())
            markdown += "\n" + "\n".join(
                line for s, x in sections.items() for line in s.card_markdown(x)
            )
        base = Path(out_dir) / model_id / dataset
        done = WrittenCard(card, base.with_suffix(".json"), base.with_suffix(".md"))
        storage.write_text(storage.CARDS, done.json_path, card.to_json())
        storage.write_text(storage.CARDS, done.markdown_path, markdown)
        written.cards.append(done)
        written.paths += [done.json_path, done.markdown_path]
    for model_id in dict.fromkeys(c.card.model.id for c in written.cards):
        cards = cards_on_disk(Path(out_dir) / model_id, model_id)
        path = Path(out_dir) / model_id / "model-index.yaml"
        index = yaml.safe_dump(model_index(model_id, cards, suites), sort_keys=False)
        storage.write_text(storage.CARDS, path, index)
        written.paths.append(path)
        for suite in suites:
            if not isinstance(suite, TypedCardSuite):
                continue
            for name, page in suite.model_pages(store, model_id, run_id, level).items():
                path = Path(out_dir) / model_id / name
                storage.write_text(storage.CARDS, path, page)
                written.paths.append(path)
    return written
