"""The configuration envelope in a GRID card (SafetyRepro App. B (iii)–(vi)): the section built
from the run's envelope analysis, the card of a benchmark only the envelope audited, and the
Markdown (what flipgate.envelope.suite gives the cards through flipgate.cards.build.TypedCardSuite).
"""

from __future__ import annotations

from typing import Any

from flipgate.cards.build import CardContext
from flipgate.cards.markdown import fmt_estimate, num
from flipgate.cards.model import (
    CoreTier,
    Decoding,
    EnvelopeSection,
    Estimate,
    FewShot,
    GridCard,
    Neighbourhood,
    ParseClean,
    RankingStability,
    Scope,
    Scores,
    ScoringPath,
)
from flipgate.envelope.names import ENVELOPE_ANALYSES
from flipgate.markdown_text import md_escape


def _analysis(ctx: CardContext) -> dict | None:
    """The envelope analysis of the card's dataset (a benchmark), where it measured the model."""
    envelope = ctx.store.analysis(ENVELOPE_ANALYSES, ctx.dataset)
    return envelope if envelope and ctx.model_id in envelope["models"] else None


def card_fields(ctx: CardContext) -> dict[str, Any]:
    """The card's ``envelope`` section and the receipt's ``envelope_rules_sha256``, where the
    envelope measured the model on the dataset."""
    envelope = _analysis(ctx)
    if envelope is None:
        return {}
    return {
        "envelope": envelope_section(envelope, ctx.model_id),
        "envelope_rules_sha256": envelope["envelope_sha256"],
    }


def card_fields_markdown(card: dict) -> list[str]:
    """The card's envelope section as Markdown, where it has one."""
    return envelope_markdown(card["envelope"], fmt_estimate) if card.get("envelope") else []


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


def own_card(ctx: CardContext, sections: dict[str, Any]) -> GridCard | None:
    """A card for a benchmark audited only by the configuration envelope: the receipt is the anchor
    configuration, the point score its score; the neighbourhood is the envelope's. None where the
    envelope did not measure the model on the dataset."""
    envelope = _analysis(ctx)
    if envelope is None:
        return None
    anchor = envelope["anchor"]
    section = sections["envelope"]
    point = section.point_score
    readout = "letter_logprob" if anchor["scoring"] == "logprob" else "regex"
    return ctx.suite_card(
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
        f"point score {num(env['point_score'])}.",
        "",
        "| score min | mean | max | SDI | " + " | ".join(map(esc, env["verdict_stability"])) + " |",
        "|---|---|---|---|" + "---|" * len(env["verdict_stability"]),
        f"| {num(n['min'])} | {num(n['mean'])} | {num(n['max'])} | {fmt(n['sdi'])} | "
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
            f"| {num(p['rho_flip'])} | {num(p['ceiling'])} | {num(p['strict_disagreement'])} |"
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
            f"{v['n_better']}, equal on {v['n_equal']}; ρ_flip {num(v['rho_flip'])} "
            f"(ceiling {num(v['ceiling'])}).",
            "",
            "| configuration | candidate | baseline | Δ |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {esc(d['config'])} | {num(d['candidate'])} | {num(d['baseline'])} | "
            f"{signed(d['delta'])} |"
            for d in v["deltas"]
        ]
    variance = env.get("variance") or {}
    lines += [
        "",
        "Variance shares (Type-II ANOVA, SafetyRepro App. F): "
        + (
            f"η² model {num(variance['eta_model'])}, implementation {num(variance['eta_impl'])}, "
            f"ρ = {num(variance['rho'])}."
            if "eta_model" in variance
            else esc(variance.get("not_estimable", "–"))
        ),
    ]
    lines += ["", "| configuration | score | parse rate |", "|---|---|---|"]
    lines += [
        f"| {esc(c['config'])} | {num(c['score'])} | {num(c['parse_rate'])} |"
        for c in env["configs"]
    ]
    lines += ["", "Not varied: " + "; ".join(map(esc, env["scope_not_varied"])) + "."]
    return lines


def model_index_metrics(card: dict) -> list[dict]:
    """The envelope's headline metrics for the model's Hugging Face ``model-index``: SDI over the
    configurations and the CFR at each verdict threshold θ."""
    env = card.get("envelope")
    if not env:
        return []
    sdi = {
        "type": "sdi",
        "name": f"SDI over {env['n_configs']} configurations ({env['name']})",
        "value": env["score_neighbourhood"]["sdi"]["estimate"],
    }
    return [sdi] + [
        {
            "type": "cfr",
            "name": f"CFR at θ={k.split('@')[1]} ({env['name']})",
            "value": v["estimate"],
        }
        for k, v in env["verdict_stability"].items()
    ]


def own_card_label(card: dict) -> str | None:
    """How the model card's table names an envelope-only benchmark's row."""
    env = card.get("envelope")
    return f"envelope {md_escape(env.get('name'))}" if env else None
