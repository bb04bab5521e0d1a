"""The readout decomposition suite's cost projection (flipgate.cost prices it)."""

from __future__ import annotations

from flipgate.cost import Projection, add_call, charge, require_prices, uncached
from flipgate.decomposition.names import DECOMPOSITION_CELL


def project_decomposition(auditor, plan, model_id: str) -> list[Projection]:
    """Project the readout decomposition suite's calls (no pilot): every variant of every item
    on every axis, and with the judge readout one judgement per trial (K calls each under
    ``audit.judge_consensus``) charged to the judge, its reply estimated at ~4 characters a
    token of the model's ``max_new_tokens``. Calls the response cache answers cost nothing."""
    from flipgate.decomposition.run import DecompositionRunner, axis_cell
    from flipgate.judging.choice import choice_request, choice_requests, load_agreement_set
    from flipgate.paraphrases import ParaphraseStore

    cfg = auditor.config
    runner = DecompositionRunner(auditor, plan, ParaphraseStore.load(plan.paraphrases))
    judge_id = runner.judge_id(model_id)
    require_prices(cfg.models, [model_id, judge_id])  # before the work
    readouts = runner.readouts(model_id)[0]
    model, judge = cfg.models[model_id], cfg.models[judge_id]
    own = Projection(model_id, suite=DECOMPOSITION_CELL)
    judged = own if judge_id == model_id else Projection(judge_id, suite="readouts judge")
    max_out = int(model.get("max_new_tokens", 16))
    judge_out = int(judge.get("max_new_tokens", 16))
    reply = "x" * 4 * max_out
    paid_judge = "judge" in readouts and judge["backend"] == "litellm"
    if paid_judge:  # the judge gate: each labelled reply, and the swap test's reversed listing
        for r in load_agreement_set(plan.agreement_set):
            gate = choice_requests(
                r.question, r.labels, r.options, r.reply, cfg.judge_consensus, cfg.seed
            )
            if r.answer is not None:
                reverse = range(len(r.labels))[::-1]
                gate.append(choice_request(r.question, r.labels, r.options, r.reply, reverse))
            for q in uncached(auditor, judge_id, gate):
                add_call(judged, q, judge_out)
    for spec in plan.datasets:
        for axis_name in plan.axes:
            axis = runner.axis(axis_name)
            for it in runner.items(spec):
                for v in axis.variants(it):
                    key = (spec.name, it.item_id, axis_cell(axis_name), v.condition, 0)
                    req = v.render(it, key, "cloze" in readouts)
                    if model["backend"] == "litellm":
                        add_call(own, req, max_out, len(uncached(auditor, model_id, [req])))
                    if paid_judge:
                        options = [it.options[s] for s in v.perm]
                        for q in choice_requests(
                            it.question, req.labels, options, reply, cfg.judge_consensus, cfg.seed
                        ):
                            add_call(judged, q, judge_out)
    both = [own] if judged is own else [own, judged]
    return [charge(p, cfg.models[p.model_id]) for p in both if p.n_calls]
