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

from flipgate import metrics as M
from flipgate import storage
from flipgate.analysis_cache import package_versions
from flipgate.axes.formats import FORMATS
from flipgate.cards.continuity import continuity_markdown, continuity_section
from flipgate.cards.decomposition import decomposition_markdown, decomposition_section
from flipgate.cards.judge import judge_markdown, judge_section
from flipgate.cards.model import (
    SCHEMA_PATH,
    SCHEMA_VERSION,
    AxisReceipt,
    Calls,
    CardVerdict,
    Comparison,
    CoreTier,
    DatasetInfo,
    Decoding,
    DecompositionSection,
    EnvelopeSection,
    Estimate,
    FewShot,
    GridCard,
    MetricBlock,
    ModelInfo,
    Neighbourhood,
    OdiSection,
    ParseClean,
    RankingStability,
    RegressionSection,
    RunInfo,
    Scope,
    Scores,
    ScoringPath,
    Template,
)
from flipgate.cell import Cell
from flipgate.continuity.record import ContinuityRecord
from flipgate.continuity.suite import CONTINUITY_CELL
from flipgate.decomposition.record import DecompositionRecord
from flipgate.facets import FACETS, readouts_for
from flipgate.hashing import sha256_text
from flipgate.judges.record import JudgeRecord
from flipgate.judges.suite import JUDGE_CELL
from flipgate.markdown_text import md_escape
from flipgate.results import CellSummary, Verdict
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
        "engine": fingerprint.get("engine"),
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


def build_card(
    store: TrialStore,
    model_id: str,
    dataset: str,
    run_id: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
    root: Path | None = None,
) -> GridCard:
    """The card of ``model_id`` on ``dataset``: a facet card, or an envelope card for a benchmark
    audited only by the configuration envelope; checked against the shipped schema."""
    trials = store.trials(model_id=model_id, dataset=dataset)
    suite_trials = trials["facet"].str.startswith(("envelope[", "axis[", "continuity[")) | (
        trials["facet"] == JUDGE_CELL
    )
    axis_trials = trials[trials["facet"].str.startswith("axis[")]
    trials = trials[~suite_trials]
    records = [r for r in store.records(DecompositionRecord, model_id) if r.dataset == dataset]
    decomposition = decomposition_section(records) if records else None
    judge_record = next(
        (r for r in store.records(JudgeRecord, model_id) if r.dataset == dataset), None
    )
    envelope = store.envelope(dataset)
    envelope = envelope if envelope and model_id in envelope["models"] else None
    model = store.models().get(model_id, {"fingerprint": {}, "config": {}})
    fp, cfg = model["fingerprint"], model["config"]
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
    sweep_records = [r for r in store.records(ContinuityRecord, model_id) if r.sweep == dataset]
    if not order and not controls and envelope is None and sweep_records:
        return _continuity_card(store, model_id, dataset, run_id, sweep_records, model, root)
    if not order and not controls and envelope is None and judge_record is not None:
        return _judge_card(
            store, model_id, dataset, run_id, judge_record, model, root, decomposition
        )
    if not order and not controls and envelope is None and decomposition is not None:
        return _decomposition_card(
            store, model_id, dataset, run_id, decomposition, axis_trials, model, root, level
        )
    if not order and not controls:  # an envelope-only benchmark (suites/benchmarks)
        return _envelope_card(store, model_id, dataset, run_id, envelope, model, root)
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
    odi = store.odi()
    if odi and (
        model_id not in odi["roster"] or all(c["dataset"] != dataset for c in odi["cells"].values())
    ):
        odi = None  # the panel's fit has no cell of this card
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
            envelope_rules_sha256=envelope["envelope_sha256"] if envelope else None,
            **_identity(fp, root),
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
        envelope=envelope_section(envelope, model_id) if envelope else None,
        odi=odi_section(odi, model_id, dataset, store.verdicts(model_id, "odi")) if odi else None,
        regression=regression_section(store.comparisons(model_id), dataset, level),
        readout_decomposition=decomposition,
        judge_consensus=judge_section(judge_record) if judge_record else None,
    )
    validate_card(card.to_data())
    return card


def odi_section(analysis: dict, model_id: str, dataset: str, verdicts: list[Verdict]) -> OdiSection:
    """docs/definitions.md §4 for one card: σ_π / σ_δ of the card's facets and mean |δ| of its cells
    from the panel's modal fit, the model's θ and its Δθ against its baselines
    (docs/definitions.md §11) from the correct fit, both fits' diagnostics and the ODI verdicts."""
    cells = {c: v for c, v in analysis["cells"].items() if v["dataset"] == dataset}
    facets = sorted({v["facet"] for v in cells.values()})
    return OdiSection(
        profile=analysis["profile"],
        panel=analysis["roster"],
        hdi_prob=analysis["hdi_prob"],
        ci_level=analysis.get("ci_level"),
        readouts=analysis["readouts"].get(model_id, {}),
        sizes=analysis["sizes"],
        draws_per_chain=analysis.get("draws_per_chain"),
        facets={f: analysis["facets"][f] for f in facets},
        cells=cells,
        theta=(analysis["models"].get(model_id) or {}).get("theta"),
        versions=[v for v in analysis.get("versions", []) if v["candidate"] == model_id],
        diagnostics=analysis["diagnostics"],
        passed=analysis["passed"],
        unmeasured=analysis.get("unmeasured", []),
        verdicts=[
            Verdict.model_validate(v.model_dump(exclude={"q_value"}))  # ODI estimates: no p-value
            for v in verdicts
            if v.target in {*facets, *cells, *analysis["diagnostics"]}
        ],
    )


def regression_section(
    comparisons: list[dict], dataset: str, level: float | None
) -> RegressionSection | None:
    """docs/definitions.md §11 for one card: the stored comparisons of this model (the candidate)
    with its baseline(s) on the dataset's cells, without their per-item values, and the comparison
    table; None when there are none."""
    from flipgate.regression.table import markdown

    mine = [_without_per_item(c) for c in comparisons if c["dataset"] == dataset]
    if not mine:
        return None
    return RegressionSection(
        level=level,
        comparisons=[Comparison.model_validate(c) for c in mine],
        markdown=markdown(mine, level),
    )


def _without_per_item(comparison: dict) -> dict:
    return {
        **comparison,
        "readouts": {
            r: {k: v for k, v in block.items() if k != "per_item"}
            for r, block in comparison["readouts"].items()
        },
    }


def _short(sha, n: int = 12) -> str | None:
    return sha[:n] if isinstance(sha, str) and len(sha) > n else sha


#: at most this many item ids per list in a regression section's Markdown
ITEMS_SHOWN = 20


def regression_markdown(
    comparisons: list[dict],
    level: float | None = None,
    heading: str | None = "## Regression vs baseline",
) -> list[str]:
    """Comparisons (:meth:`CellComparison.to_dict` records) as Markdown: each baseline's identity,
    the comparison table, the overlap where a comparison used only the shared (item, ordering)
    pairs, and the items whose flip state or correctness changed (primary readout)."""
    from flipgate.regression.table import markdown

    esc = md_escape
    lines = ["", heading, ""] if heading else [""]
    identities: dict[str, dict] = {}
    for c in comparisons:
        identities.setdefault(c["baseline"], c.get("baseline_identity") or {})
    for name, ident in identities.items():
        lines.append(
            f"Baseline {esc(name)}: model {esc(ident.get('model_id', name))}, weights sha256 "
            f"{esc(_short(ident.get('weights_sha256')))}, run {esc(ident.get('run_id'))}, git "
            "commit "
            f"{esc(_short(ident.get('git_commit')))}, {esc(ident.get('date'))}."
        )
    lines += [
        "",
        "Δ = candidate − baseline, paired per item; ▲ worse / ▼ better where the CI excludes 0; "
        "McNemar p on the discordant items.",
        "",
        markdown(comparisons, level).rstrip("\n"),
    ]
    for c in comparisons:
        what = f"{esc(c['cell'])} × {esc(c['dataset'])} vs {esc(c['baseline'])}"
        o = c["overlap"]
        if o.get("partial") and not (
            o["baseline_pairs"] == o["candidate_pairs"] == o["shared_pairs"]
        ):
            union = o["baseline_pairs"] + o["candidate_pairs"] - o["shared_pairs"]
            lines += [
                "",
                f"{what}: compared on {o['shared_pairs']} of {union} (item, ordering) pairs "
                f"(baseline {o['baseline_pairs']}, candidate {o['candidate_pairs']}; "
                f"{o['shared_items']} "
                f"shared items of {o['baseline_items']} / {o['candidate_items']}).",
            ]
        block = c["readouts"][c["primary_readout"]]
        lists = [(label.replace("_", " "), ids) for label, ids in block["items"].items() if ids]
        if lists:
            lines += ["", f"{what} ({esc(block['readout'])}):"]
            for label, ids in lists:
                shown = ", ".join(esc(i) for i in ids[:ITEMS_SHOWN])
                more = f", … and {len(ids) - ITEMS_SHOWN} more" if len(ids) > ITEMS_SHOWN else ""
                lines.append(f"- {label} ({len(ids)}): {shown}{more}")
    return lines


def envelope_section(analysis: dict, model_id: str) -> EnvelopeSection:
    """SafetyRepro App. B (iii)–(vi) for one model: score neighbourhood, verdict and ranking
    stability, scope; ``versions``: its envelope deltas against its baseline, where it names one in
    the roster."""
    mine = analysis["models"][model_id]
    versions = [v for v in analysis.get("versions", []) if v["candidate"] == model_id]
    clean, core = analysis["parse_clean"], analysis.get("core_tier")
    return EnvelopeSection(
        name=analysis["envelope"],
        sha256=analysis["envelope_sha256"],
        tier=analysis["tier"],
        n_configs=analysis["n_configs"],
        n_items=analysis["n_items"],
        anchor=analysis["anchor"],
        point_score=mine["point_score"],
        score_neighbourhood=Neighbourhood.model_validate(
            {k: mine[k] for k in ("min", "mean", "max", "sdi", "n_configs", "parse_rate_mean")}
        ),
        verdict_stability={
            k: Estimate.model_validate(v) for k, v in mine.items() if k.startswith("cfr@")
        },
        ranking_stability=RankingStability.model_validate(analysis["roster"]),
        variance=analysis["variance"],
        headline_max=analysis.get("headline_max", {}),
        parse_clean=ParseClean(
            min_parse_rate=clean["min_parse_rate"],
            cells_dropped=clean["cells_dropped"],
            model=clean["models"].get(model_id),
            roster=clean["roster"],
        ),
        by_scoring_path={
            path: models.get(model_id) for path, models in analysis["by_scoring_path"].items()
        },
        core_tier=CoreTier(model=core["models"].get(model_id), roster=core["roster"])
        if core is not None
        else None,
        configs=[c for c in analysis["configs"] if c["model"] == model_id],
        axes=analysis["axes"],
        exemplar_ids=analysis["exemplar_ids"],
        scope_not_varied=analysis["scope_not_varied"],
        # docs/definitions.md §11: this model vs its baseline (left out where it names none)
        versions=versions or None,
    )


def _judge_card(
    store: TrialStore,
    model_id: str,
    dataset: str,
    run_id: str,
    record: JudgeRecord,
    model: dict,
    root: Path | None,
    decomposition: DecompositionSection | None,
) -> GridCard:
    """A card for a candidate-set dataset only the judge suite audited: the model is the judge,
    the score its direct (ordering 0) and per-run accuracy over all K orderings."""
    from flipgate.judge.listwise import INSTRUCTION

    r = record.result
    hits = [[float(p is not None and p == v.gold) for p in v.picks] for v in r.items.values()]
    per_run = M.bootstrap_ci(
        [h for row in hits for h in row], cluster=[i for i, row in enumerate(hits) for _ in row]
    )
    template = Template(id="pcfjudge-listwise-v1", sha256=sha256_text(INSTRUCTION))
    return _suite_card(
        store,
        model_id,
        dataset,
        run_id,
        model,
        root,
        n_items=r.n_items,
        sampling="seed-42 uniform shuffle of the candidate sets with a gold candidate, first N",
        receipt=_plain_receipt(
            model,
            template.id,
            template.sha256,
            {template.id: template},
            ScoringPath(
                primary_readout={JUDGE_CELL: record.readout},
                readouts=[record.readout],
                map_back={JUDGE_CELL: "candidate number -> source candidate index"},
            ),
            {JUDGE_CELL: record.manifest_sha256} if record.manifest_sha256 else {},
        ),
        scores=Scores(
            facet=JUDGE_CELL,
            primary_readout=record.readout,
            accuracy_canonical=Estimate(
                estimate=r.direct_accuracy.estimate, ci=r.direct_accuracy.ci
            ),
            accuracy_all_orderings=Estimate(estimate=per_run[0], ci=(per_run[1], per_run[2])),
        ),
        scope=Scope(
            varied=[f"candidate order (K={r.k} orderings shared by every set)"],
            not_varied=["judge prompt", "decoding", "model weights and precision"],
        ),
        readout_decomposition=decomposition,
        judge_consensus=judge_section(record),
    )


def _continuity_card(
    store: TrialStore,
    model_id: str,
    sweep: str,
    run_id: str,
    records: list[ContinuityRecord],
    model: dict,
    root: Path | None,
) -> GridCard:
    """A card for a continuity sweep (docs/definitions.md §10): the score is the greedy answer's
    accuracy over the sweep's inputs, the section every estimator's losses."""
    from flipgate.continuity.run import ANSWER_PREFIX
    from flipgate.continuity.sweeps import SWEEPS

    section = continuity_section(records)
    accuracy = section.estimators[records[0].estimator].accuracy
    spec = SWEEPS[sweep]
    template = Template(id=f"continuity-{sweep}-v1", sha256=sha256_text(spec.question))
    cell = CONTINUITY_CELL
    return _suite_card(
        store,
        model_id,
        sweep,
        run_id,
        model,
        root,
        n_items=section.n_inputs,
        sampling=f"{section.n_sources} seeded sweeps (flipgate/continuity/sweeps.py)",
        receipt=_plain_receipt(
            model,
            template.id,
            template.sha256,
            {template.id: template},
            ScoringPath(
                primary_readout={cell: "regex"},
                readouts=["regex"],
                map_back={cell: f"the answer after {ANSWER_PREFIX!r} -> {', '.join(spec.answers)}"},
            ),
            {cell: section.manifest_sha256} if section.manifest_sha256 else {},
        ),
        scores=Scores(
            facet=cell,
            primary_readout="regex",
            accuracy_canonical=accuracy,
            accuracy_all_orderings=accuracy,
        ),
        scope=Scope(
            varied=["the input along the sweep (its distance d to the most ambiguous input)"],
            not_varied=["prompt template within a sweep", "model weights and precision"],
        ),
        continuity=section,
    )


def _decomposition_card(
    store: TrialStore,
    model_id: str,
    dataset: str,
    run_id: str,
    section: DecompositionSection,
    trials,
    model: dict,
    root: Path | None,
    level: float,
) -> GridCard:
    """A card for a dataset only the readout decomposition audited: the receipt is the canonical
    variant (Facet-Probe's template, A–D, options in source order), the score its accuracy under
    the reference readout."""
    ref = section.reference_readout
    canonical = trials[trials["condition"] == 0].drop_duplicates("item_id")
    correct = lambda rows: [  # noqa: E731
        float("nan") if c.get(ref) is None else float(c[ref]) for c in rows["correct"]
    ]
    acc = M.bootstrap_ci(correct(canonical), level=level)
    acc_all = M.bootstrap_ci(correct(trials), cluster=list(trials["item_id"]), level=level)
    return _suite_card(
        store,
        model_id,
        dataset,
        run_id,
        model,
        root,
        n_items=int(trials["item_id"].nunique()),
        sampling="seed-42 uniform shuffle of the text multiple-choice items, first N",
        receipt=_plain_receipt(
            model,
            FORMATS[0].id,
            FORMATS[0].sha256,
            {f.id: Template(id=f.id, sha256=f.sha256) for f in FORMATS},
            ScoringPath(
                primary_readout={"decomposition": ref},
                readouts=sorted({r for a in section.axes for r in a.readouts}) or [ref],
                map_back={"decomposition": "displayed label -> source option index"},
            ),
            {a.axis: a.manifest_sha256 for a in section.axes if a.manifest_sha256},
        ),
        scores=Scores(
            facet="decomposition",
            primary_readout=ref,
            accuracy_canonical=Estimate(estimate=acc[0], ci=(acc[1], acc[2])),
            accuracy_all_orderings=Estimate(estimate=acc_all[0], ci=(acc_all[1], acc_all[2])),
        ),
        scope=Scope(
            varied=[f"{a.axis} ({a.n_conditions or 0} variants per item)" for a in section.axes]
            + ["readout: " + ", ".join(sorted({r for a in section.axes for r in a.readouts}))],
            not_varied=["decoding", "model weights and precision", "few-shot exemplars (none)"],
        ),
        readout_decomposition=section,
    )


def _envelope_card(
    store: TrialStore,
    model_id: str,
    dataset: str,
    run_id: str,
    envelope: dict | None,
    model: dict,
    root: Path | None,
) -> GridCard:
    """A card for a benchmark audited only by the configuration envelope: the receipt is the anchor
    configuration, the point score its score; the neighbourhood is the envelope's."""
    if envelope is None:
        raise ValueError(
            f"{store.path}: {model_id}/{dataset} has envelope trials but no envelope analysis"
        )
    anchor = envelope["anchor"]
    section = envelope_section(envelope, model_id)
    point = section.point_score
    readout = "letter_logprob" if anchor["scoring"] == "logprob" else "regex"
    return _suite_card(
        store,
        model_id,
        dataset,
        run_id,
        model,
        root,
        n_items=envelope["n_items"],
        sampling="seed-42 uniform shuffle, first N; the next items are the few-shot exemplars",
        receipt=dict(
            template_id=f"sr-{anchor['template']}",
            template_sha256=envelope["template_sha256"][anchor["template"]],
            templates={},
            decoding=Decoding(name=anchor["decoding"], greedy=anchor["decoding"] == "greedy"),
            few_shot=FewShot(
                count=anchor["few_shot"],
                exemplar_ids=envelope["exemplar_ids"][: anchor["few_shot"]],
            ),
            scoring_path=ScoringPath(
                primary_readout={"envelope": readout}, readouts=[readout], map_back={}
            ),
            quantization=anchor["quantization"],
            manifest_sha256={},
            envelope_rules_sha256=envelope["envelope_sha256"],
        ),
        scores=Scores(
            facet="envelope",
            primary_readout=readout,
            accuracy_canonical=Estimate(estimate=point, ci=None),
            accuracy_all_orderings=Estimate(estimate=section.score_neighbourhood.mean, ci=None),
        ),
        scope=Scope(
            varied=[
                f"{axis}: {', '.join(map(str, values))}"
                for axis, values in envelope["axes"].items()
            ],
            not_varied=envelope["scope_not_varied"],
        ),
        envelope=section,
    )


def _suite_card(
    store: TrialStore,
    model_id: str,
    dataset: str,
    run_id: str,
    model: dict,
    root: Path | None,
    *,
    n_items: int,
    sampling: str,
    receipt: dict[str, Any],
    scores: Scores,
    scope: Scope,
    **sections: Any,
) -> GridCard:
    """The card of a dataset that one suite alone audited (judge, continuity, decomposition,
    envelope): what every card holds (model, dataset, run, the receipt with the model's identity,
    the threshold verdicts), around the suite's receipt, score, scope and ``sections``; checked
    against the schema."""
    fp = model["fingerprint"]
    card = GridCard(
        schema_version=SCHEMA_VERSION,
        model=ModelInfo(id=model_id, backend=fp.get("backend", "?"), source=fp.get("source")),
        dataset=DatasetInfo(name=dataset, n_items=n_items, sampling=sampling, screens={}),
        run=_run_info(store, model_id, run_id),
        axis_receipt=AxisReceipt(**receipt, **_identity(fp, root)),
        scores=scores,
        order_robustness={},
        controls={},
        thresholds=[threshold_entry(v) for v in store.verdicts(model_id, dataset)],
        scope=scope,
        **sections,
    )
    validate_card(card.to_data())
    return card


def _plain_receipt(
    model: dict,
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
        decoding=_decoding(model["config"]),
        few_shot=FewShot(count=0, exemplar_ids=[]),
        scoring_path=scoring_path,
        quantization=model["fingerprint"].get("quantization"),
        manifest_sha256=manifest_sha256,
        envelope_rules_sha256=None,
    )


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
    any."""
    calls = store.calls().get(model_id)
    return RunInfo(
        run_id=run_id,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        trials_store=str(store.path),
        calls=Calls.model_validate(calls) if calls else None,
    )


def _num(x) -> str:
    return "–" if x is None or x != x else f"{x:.3f}"


def _ci_text(verdict: dict) -> str:
    """A verdict's interval as ``[lo, hi]`` with the level it was computed at, or – where it has
    none."""
    ci = verdict.get("ci")
    level = f"{verdict['level']:.0%} " if verdict.get("level") else ""
    return "–" if not ci or ci[0] is None else f"{level}[{ci[0]:.3f}, {ci[1]:.3f}]"


def _verdict_text(v: dict) -> str:
    """The label, and what the gate did with it where that differs (docs/thresholds.md):
    e.g. "**inconclusive** → fail" for an unproven ``upper`` bound."""
    label, outcome = v["verdict"], v.get("outcome")
    return f"**{md_escape(label)}**" + (
        f" → {md_escape(outcome)}" if outcome and outcome != label else ""
    )


def card_markdown(card: dict) -> str:
    r = card["axis_receipt"]

    def fmt(m: dict | None) -> str:
        if m is None or m["estimate"] is None:
            return "–"
        ci = m.get("ci")
        tail = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and ci[0] is not None else ""
        return f"{m['estimate']:.3f}{tail}"

    # every string below that came from models.yaml, thresholds, envelopes or the store
    esc = md_escape
    lines = [
        f"# GRID card: {esc(card['model']['id'])} on {esc(card['dataset']['name'])}",
        "",
        f"Run {esc(card['run']['run_id'])}, {esc(card['run']['created'])}; N = "
        f"{card['dataset']['n_items']} items "
        f"({esc(card['dataset']['sampling'])}).",
    ]
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
                    f"| {fmt(m['acc_swing'])} | {fmt(m.get('delta_order'))} |"
                )
    for facet, by_readout in card["order_robustness"].items():
        primary = card["axis_receipt"]["scoring_path"]["primary_readout"].get(facet)
        m = by_readout.get(primary) or next(iter(by_readout.values()))
        if not m.get("k_policies"):
            continue
        lines += [
            "",
            f"### K-policies: {esc(facet)} ({esc(primary)})",
            "",
            f"K=2 screen recall against K={m['k']} flip: {_num(m.get('k2_screen_recall'))}; "
            "flip rate by K: "
            + ", ".join(f"K={k}: {_num(v)}" for k, v in m["k_ablation"].items())
            + ".",
            "",
            "| policy | cost (calls/item) | accuracy | selective accuracy | coverage |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {esc(r['policy'])} | {r['cost']} | {_num(r['accuracy'])} | "
            f"{_num(r['selective_accuracy'])} "
            f"| {_num(r['coverage'])} |"
            for r in m["k_policies"]
        ]
    if card.get("envelope"):
        lines += envelope_markdown(card["envelope"], fmt)
    if card.get("odi"):
        lines += odi_markdown(card["odi"])
    if card.get("readout_decomposition"):
        lines += decomposition_markdown(card["readout_decomposition"], fmt, esc)
    if card.get("judge_consensus"):
        lines += judge_markdown(card["judge_consensus"], fmt, esc)
    if card.get("continuity"):
        lines += continuity_markdown(card["continuity"], fmt, esc)
    if card.get("regression"):
        lines += regression_markdown(
            card["regression"]["comparisons"], card["regression"].get("level")
        )
    lines += [
        "",
        "## Threshold verdicts",
        "",
        "| cell | threshold | estimate | CI | p | BH q | verdict | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in card["thresholds"]:
        lines.append(
            f"| {esc(v.get('facet', ''))} | {esc(v['threshold'])} | {_num(v.get('estimate'))} | "
            f"{_ci_text(v)} "
            f"| {_num(v.get('p_value'))} | {_num(v.get('q_value'))} | {_verdict_text(v)} "
            f"| {esc(v.get('why') or '')} |"
        )
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


def envelope_markdown(env: dict, fmt) -> list[str]:
    """SafetyRepro App. B (iii)–(vi) as Markdown."""
    n = env["score_neighbourhood"]
    r = env["ranking_stability"]
    esc = md_escape
    lines = [
        "",
        "## Configuration envelope",
        "",
        f"Envelope {esc(env['name'])} (sha256 {esc(env['sha256'])}), tier {esc(env['tier'])}: "
        f"{env['n_configs']} valid "
        f"configurations, N = {env['n_items']} items. Anchor (receipt) configuration "
        f"{esc(env['anchor']['id'])}: "
        f"point score {_num(env['point_score'])}.",
        "",
        "| score min | mean | max | SDI | " + " | ".join(map(esc, env["verdict_stability"])) + " |",
        "|---|---|---|---|" + "---|" * len(env["verdict_stability"]),
        f"| {_num(n['min'])} | {_num(n['mean'])} | {_num(n['max'])} | {fmt(n['sdi'])} | "
        + " | ".join(fmt(v) for v in env["verdict_stability"].values())
        + " |",
        "",
        f"Ranking stability over roster {', '.join(map(esc, r['models']))} ({r['n_configs']} "
        "shared configurations): "
        + (
            f"τ_R {fmt(r['tau_r'])}, total-order mismatch {fmt(r['total_order_mismatch'])}, "
            "orderings reached "
            f"{fmt(r['orderings_reached'])}."
            if "tau_r" in r
            else esc(r.get("note", "")) + "."
        ),
    ]
    if r["pairs"]:
        lines += [
            "",
            "| pair | N+ | N− | N0 | ρ_flip | ceiling | strict disagreement |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {esc(p['model_a'])} vs {esc(p['model_b'])} | {p['n_plus']} | {p['n_minus']} | "
            f"{p['n_zero']} "
            f"| {_num(p['rho_flip'])} | {_num(p['ceiling'])} | {_num(p['strict_disagreement'])} |"
            for p in r["pairs"]
        ]
    signed = lambda x: "–" if x is None or x != x else f"{x:+.3f}" if x else "0.000"  # noqa: E731
    # docs/definitions.md §11: this model (candidate) vs its baseline over the envelope
    for v in env.get("versions", []):
        if "missing" in v:
            lines += ["", f"vs baseline {esc(v['baseline'])}: not compared ({esc(v['missing'])})."]
            continue
        lines += [
            "",
            f"vs baseline {esc(v['baseline'])} over {v['n_configs']} shared configurations "
            f"(Δ = candidate − baseline): mean Δ {fmt(v['mean_delta'])} (configuration bootstrap), "
            f"min {signed(v['min_delta'])}, max {signed(v['max_delta'])}; worse on {v['n_worse']}, "
            "better on "
            f"{v['n_better']}, equal on {v['n_equal']}; ρ_flip {_num(v['rho_flip'])} "
            f"(ceiling {_num(v['ceiling'])}).",
            "",
            "| configuration | candidate | baseline | Δ |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {esc(d['config'])} | {_num(d['candidate'])} | {_num(d['baseline'])} | "
            f"{signed(d['delta'])} |"
            for d in v["deltas"]
        ]
    variance = env.get("variance") or {}
    lines += [
        "",
        "Variance shares (Type-II ANOVA, SafetyRepro App. F): "
        + (
            f"η² model {_num(variance['eta_model'])}, implementation {_num(variance['eta_impl'])}, "
            f"ρ = {_num(variance['rho'])}."
            if "eta_model" in variance
            else esc(variance.get("not_estimable", "–"))
        ),
    ]
    lines += ["", "| configuration | score | parse rate |", "|---|---|---|"]
    lines += [
        f"| {esc(c['config'])} | {_num(c['score'])} | {_num(c['parse_rate'])} |"
        for c in env["configs"]
    ]
    lines += ["", "Not varied: " + "; ".join(map(esc, env["scope_not_varied"])) + "."]
    return lines


def odi_markdown(odi: dict) -> list[str]:
    """The card's ODI section (docs/definitions.md §4) as Markdown."""

    def hdi(m: dict) -> str:
        median = _num(m.get("median", m.get("estimate")))
        return f"{median} [{_num(m['hdi'][0])}, {_num(m['hdi'][1])}]"

    pct = f"{odi['hdi_prob']:.0%}"
    esc = md_escape
    lines = [
        "",
        "## ODI: ordering-decomposed IRT",
        "",
        f"Panel {', '.join(map(esc, odi['panel']))}; profile {esc(odi['profile'])} (draws per "
        "chain "
        f"{json.dumps(odi.get('draws_per_chain'))}); posterior medians with {pct} HDIs. "
        "σ_π is per-item ordering noise pooled within the facet (median over its items), σ_δ the "
        "facet's "
        "scale of per-ordering offsets, mean |δ| the cell's average offset (centred within the "
        "cell).",
        "",
        f"| facet | σ_π [{pct} HDI] | σ_δ [{pct} HDI] |",
        "|---|---|---|",
    ]
    lines += [
        f"| {esc(f)} | {hdi(v['sigma_pi'])} | {hdi(v['sigma_delta'])} |"
        for f, v in odi["facets"].items()
    ]
    lines += ["", f"| cell | mean abs δ [{pct} HDI] |", "|---|---|"]
    lines += [f"| {esc(c)} | {hdi(v['mean_abs_delta'])} |" for c, v in odi["cells"].items()]
    if odi.get("theta"):
        lines += ["", f"θ (correct outcome, centred over the panel): {hdi(odi['theta'])}."]
    for v in odi.get("versions", []):
        d = v.get("delta_theta")
        lines += [
            "",
            f"Δθ vs {esc(v['baseline'])} (correct outcome): "
            + (
                f"median {_num(d['median'])}, {pct} HDI [{_num(d['hdi'][0])}, {_num(d['hdi'][1])}]."
                if d
                else f"not estimated: {esc(v.get('missing'))}."
            ),
        ]
    lines += [
        "",
        "Diagnostics: "
        + "; ".join(
            f"{esc(o)}: R̂ max {_num(d['rhat_max'])}, ESS bulk min {d['ess_bulk_min']:.0f}, tail "
            f"min {d['ess_tail_min']:.0f}, "
            f"{d['divergences']} divergences"
            for o, d in odi["diagnostics"].items()
        )
        + f" → {'passed' if odi['passed'] else 'FAILED'}.",
    ]
    if odi["verdicts"]:
        lines += ["", "| ODI threshold | estimate | CI | verdict | why |", "|---|---|---|---|---|"]
        for v in odi["verdicts"]:
            lines.append(
                f"| {esc(v['threshold'])} | {_num(v.get('estimate'))} | {_ci_text(v)} | "
                f"{_verdict_text(v)} "
                f"| {esc(v.get('why') or '')} |"
            )
    return lines


def model_index(model_id: str, cards: list[dict]) -> dict:
    """A Hugging Face ``model-index`` block with each card's facet metrics."""
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
        env = card.get("envelope")
        if env:
            metrics += [
                {
                    "type": "sdi",
                    "name": f"SDI over {env['n_configs']} configurations ({env['name']})",
                    "value": env["score_neighbourhood"]["sdi"]["estimate"],
                }
            ]
            metrics += [
                {
                    "type": "cfr",
                    "name": f"CFR at θ={k.split('@')[1]} ({env['name']})",
                    "value": v["estimate"],
                }
                for k, v in env["verdict_stability"].items()
            ]
        odi = card.get("odi")
        if odi:
            metrics += [
                {
                    "type": "odi_sigma_pi",
                    "name": f"ODI σ_π {f} (panel of {len(odi['panel'])})",
                    "value": v["sigma_pi"]["median"],
                }
                for f, v in odi["facets"].items()
            ]
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
    keeps the datasets it did not audit; it returns what this run wrote. Each of ``suites``
    (flipgate.suite_api.Suite) adds its section to the cards it has one for (``suites``)."""
    pairs = store.conn.execute(
        "SELECT DISTINCT model_id, dataset FROM trials ORDER BY 1, 2"
    ).fetchall()
    written = WrittenCards()
    store.adjust_q_values()
    for model_id, dataset in pairs:
        card = build_card(store, model_id, dataset, run_id, n_boot, level, seed, root)
        markdown = card_markdown(card.to_data())
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
    for model_id in dict.fromkeys(m for m, _ in pairs):
        cards = cards_on_disk(Path(out_dir) / model_id, model_id)
        path = Path(out_dir) / model_id / "model-index.yaml"
        index = yaml.safe_dump(model_index(model_id, cards), sort_keys=False)
        storage.write_text(storage.CARDS, path, index)
        written.paths.append(path)
        comparisons = store.comparisons(model_id)
        if comparisons:
            path = Path(out_dir) / model_id / "regression.md"
            page = regression_page(model_id, comparisons, run_id, level)
            storage.write_text(storage.CARDS, path, page)
            written.paths.append(path)
    return written


def regression_page(
    model_id: str, comparisons: list[dict], run_id: str, level: float | None
) -> str:
    """``grid_cards/<model>/regression.md``: the run's whole comparison table, every dataset."""
    return (
        "\n".join(
            [
                f"# Regression: {md_escape(model_id)} vs baseline",
                "",
                f"Run {md_escape(run_id)}; {len(comparisons)} compared cells.",
            ]
            + regression_markdown(comparisons, level, heading=None)
        )
        + "\n"
    )
