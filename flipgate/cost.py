"""Cost guard (flipbench): refuse a run whose API spend would exceed ``--budget``, before spending
it.

Every API model the selected suites call needs a known price (``price`` in models.yaml or litellm's
bundled price map); one without is refused before any call. The envelope suite (suites/benchmarks)
is projected from its request plan (roster model x valid configuration x item, x ``seeds`` for a
stochastic decoding) with the conservative estimate below, and makes no pilot call. For every facet
and control cell of an order-suite API model, the first ``pilot_items`` items are run (through the
response cache, so the pilot is not paid twice) and give the cell's tokens per prompt character and
mean output tokens; the projection applies them to every request of the full plan, plus one judge
call per item of a judged cell. The pilot itself is capped by the budget: before each cell's pilot,
its uncached calls are costed conservatively (:func:`estimate_tokens`: 1 token per 2 prompt
characters, plus per-message and per-image allowances, and the full max output tokens) and
piloting stops, refusing the run, before a cell whose pilot could take the spend past the budget; a
budget too small for any pilot makes no call. The pilot's spend counts against the budget. Local
models cost nothing and are not piloted. A refusal is :class:`BudgetRefused` (exit status
``exitcodes.BUDGET_REFUSED``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from flipgate import FlipgateError
from flipgate.backends.base import Request
from flipgate.cell import Cell
from flipgate.facets import get_facet

#: conservative request-size estimate: prompt characters per token (English text runs ~4)
CHARS_PER_TOKEN = 2
#: tokens allowed per chat message (role and template overhead) and per image
TOKENS_PER_MESSAGE = 8
TOKENS_PER_IMAGE = 2000


def usd(x: float) -> str:
    """A USD amount for messages: 4 decimals, or 3 significant digits below 0.0001."""
    return f"{x:.4f}" if x == 0 or abs(x) >= 1e-4 else f"{x:.3g}"


class BudgetRefused(FlipgateError):
    """The cost guard refuses the run: over budget, or an API model without a known price.
    ``table`` holds the projection table when there is one."""

    def __init__(self, message: str, table: str | None = None):
        super().__init__(message)
        self.table = table


@dataclass
class Ledger:
    """What the pilot may spend (USD) and has spent, over every model."""

    budget: float = math.inf
    #: USD already committed by suites projected without a pilot (the envelope)
    reserved: float = 0.0
    usd: float = 0.0
    calls: int = 0


@dataclass
class Projection:
    model_id: str
    suite: str = "order"
    n_calls: int = 0
    pilot_calls: int = 0
    pilot_usd: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0
    usd: float = 0.0
    priced: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


def price_per_token(model_cfg: dict) -> tuple[float, float] | None:
    """(USD per input token, per output token): ``price`` in models.yaml, else litellm's price map;
    (0, 0) for local backends; None when an API model has no known price."""
    if model_cfg["backend"] != "litellm":
        return 0.0, 0.0
    if model_cfg.get("price"):
        p = model_cfg["price"]
        return p["input_per_mtok"] / 1e6, p["output_per_mtok"] / 1e6
    from flipgate.backends.api import import_litellm  # sets LITELLM_LOCAL_MODEL_COST_MAP first

    litellm = import_litellm()
    try:
        cost_in, cost_out = litellm.cost_per_token(
            model=model_cfg["source"]["model"], prompt_tokens=1, completion_tokens=1
        )
    except Exception:  # litellm raises for models missing from its map
        return None
    return float(cost_in), float(cost_out)


def prompt_chars(request: Request) -> int:
    return sum(len(text) for _, text in request.messages) + len(request.answer_prefix)


def require_prices(models: dict[str, dict], model_ids) -> None:
    """Raise :class:`BudgetRefused` naming every API model among ``model_ids`` with no known
    price."""
    unpriced = [m for m in dict.fromkeys(model_ids) if price_per_token(models[m]) is None]
    if unpriced:
        named = ", ".join(f"{m} ({(models[m].get('source') or {}).get('model')})" for m in unpriced)
        raise BudgetRefused(
            f"cost guard: no price known for {named}: add `price: {{input_per_mtok: .., "
            f"output_per_mtok: ..}}` (USD per million tokens) to its entry in models.yaml; "
            f"no call was made"
        )


def estimate_tokens(request: Request, max_out: int) -> tuple[int, int]:
    """A conservative (input, output) token count for one call, before making it: 1 token per
    ``CHARS_PER_TOKEN`` prompt characters plus allowances per message and image, and the request's
    whole output budget (``max_out`` when the request sets none)."""
    tokens_in = (
        math.ceil(prompt_chars(request) / CHARS_PER_TOKEN)
        + TOKENS_PER_MESSAGE * len(request.messages)
        + TOKENS_PER_IMAGE * len(request.images)
    )
    return tokens_in, int(request.max_new_tokens or max_out)


def estimate_usd(requests: list[Request], price: tuple[float, float], max_out: int) -> float:
    """Conservative USD for ``requests`` (see :func:`estimate_tokens`)."""
    return sum(
        price[0] * t_in + price[1] * t_out
        for t_in, t_out in (estimate_tokens(r, max_out) for r in requests)
    )


def _uncached(auditor, model_id: str, requests: list[Request]) -> list[Request]:
    """The requests the response cache cannot answer (all of them without a cache)."""
    if auditor.cache is None:
        return requests
    keys = auditor.cache_keys(model_id, requests)
    found = auditor.cache.get_many(keys)
    return [r for r, k in zip(requests, keys) if k not in found]


def project(
    auditor, model_id: str, pilot_items: int = 3, ledger: Ledger | None = None
) -> Projection:
    """Pilot ``model_id`` on the first ``pilot_items`` items of each cell and project the full run;
    raises :class:`BudgetRefused` before a cell whose pilot could take ``ledger`` past its
    budget."""
    from flipgate.judge import sem_flip_request

    ledger = ledger if ledger is not None else Ledger()
    cfg = auditor.config
    proj = Projection(model_id)
    if cfg.models[model_id]["backend"] != "litellm":
        return proj
    price = price_per_token(cfg.models[model_id])
    if price is None:
        require_prices(cfg.models, [model_id])  # raises: a model without a price is not piloted
    assert price is not None  # require_prices raised otherwise
    k = cfg.k
    for name, dataset in cfg.cells(model_id):
        plan, requests = auditor.cell_requests(dataset, name)
        pilot = requests[: pilot_items * k]
        fresh = _uncached(auditor, model_id, pilot)
        worst = estimate_usd(fresh, price, int(cfg.models[model_id].get("max_new_tokens", 16)))
        if ledger.reserved + ledger.usd + worst > ledger.budget:
            reserved = (
                f", the suites without a pilot are projected at {usd(ledger.reserved)} USD"
                if ledger.reserved
                else ""
            )
            raise BudgetRefused(
                f"cost guard: the pilot of {model_id} on {name}/{dataset} ({len(fresh)} calls, "
                f"up to {usd(worst)} USD "
                f"by a conservative estimate) could take the spend past --budget "
                f"{usd(ledger.budget)} (the pilot "
                f"has spent {usd(ledger.usd)} USD on {ledger.calls} calls{reserved}); "
                f"the run was not started"
            )
        outputs, cached = auditor.outputs(
            model_id, pilot, use_cache=True, label=f"pilot {name}/{dataset}"
        )
        proj.pilot_calls += sum(not hit for hit in cached)
        spent = sum(o.cost_usd for o, hit in zip(outputs, cached) if not hit)
        proj.pilot_usd += spent
        ledger.usd += spent
        ledger.calls += sum(not hit for hit in cached)
        per_char = sum(o.tokens_in for o in outputs) / max(1, sum(prompt_chars(r) for r in pilot))
        mean_out = sum(o.tokens_out for o in outputs) / max(1, len(outputs))
        cell = Cell.parse(name)
        # a control's pilot is answered by the facet's canonical calls; its replicates are keyed by
        # seed (docs/definitions.md §3.6), so every one of them is projected
        todo = requests if cell.is_control else requests[len(pilot) :]
        proj.n_calls += len(todo)
        proj.tokens_in += per_char * sum(prompt_chars(r) for r in todo)
        proj.tokens_out += mean_out * len(todo)
        if get_facet(cell.facet).judged:
            answer = "x" * int(4 * mean_out)  # ~4 characters a token
            judge_id = cfg.judge or model_id
            items = {it.item_id: it for it, *_ in plan}
            judge_chars = sum(
                prompt_chars(sem_flip_request(it, [answer] * k)) for it in items.values()
            )
            judge_price = price_per_token(cfg.models[judge_id]) or price
            runs = judge_runs(cfg, k)  # audit.judge_consensus: K calls per judgement
            proj.n_calls += runs * len(items)
            proj.usd += runs * (
                judge_price[0] * per_char * judge_chars + judge_price[1] * len(items)
            )
    proj.usd += price[0] * proj.tokens_in + price[1] * proj.tokens_out
    return proj


def judge_runs(cfg, n_shown: int) -> int:
    """Calls per judgement of an answer-reading judge shown ``n_shown`` things: 1, or the
    number of orderings under ``audit.judge_consensus``."""
    from flipgate.judge.permuted import shown_orders

    settings = cfg.judge_consensus
    return 1 if settings is None else len(shown_orders(n_shown, settings, cfg.seed))


def project_envelope(auditor, envelope, model_id: str) -> Projection:
    """Project the envelope suite's calls of ``model_id`` (no pilot): every valid configuration it
    runs on each benchmark x its items (x ``seeds`` for a stochastic decoding), each call costed
    with :func:`estimate_tokens`. The response cache is not consulted (an upper bound)."""
    from flipgate.envelope.render import render
    from flipgate.envelope.run import EnvelopeRunner

    model = auditor.config.models[model_id]
    proj = Projection(model_id, suite="envelope")
    if model["backend"] != "litellm":
        return proj
    require_prices(auditor.config.models, [model_id])  # before the work
    max_out = int(model.get("max_new_tokens", 16))
    runner = EnvelopeRunner(auditor, envelope)
    for spec in envelope.benchmarks:
        items, exemplars = runner.split(spec)
        for config in envelope.configs(spec.name):
            if not runner.applicable(model_id, config):
                continue
            calls = 1 if config.greedy else envelope.seeds
            for it in items:
                _add_call(proj, render(it, config, exemplars, 0, ()), max_out, calls)
    return _charge(proj, model)


def project_judges(auditor, plan, model_id: str) -> Projection:
    """Project the judge consensus suite's calls of ``model_id`` (no pilot): K calls per
    candidate set, one per ordering (docs/definitions.md §9), each costed with
    :func:`estimate_tokens`; calls the response cache answers cost nothing."""
    from flipgate.judge.run import JudgeRunner

    model = auditor.config.models[model_id]
    proj = Projection(model_id, suite="judges")
    if model["backend"] != "litellm":
        return proj
    require_prices(auditor.config.models, [model_id])  # before the work
    runner = JudgeRunner(auditor, plan)
    max_out = int(model.get("max_new_tokens", 16))
    for spec in plan.datasets:
        calls = runner.plan_calls(spec, runner.items(spec), plan.readout_for(model))
        for request in _uncached(auditor, model_id, [c[3] for c in calls]):
            _add_call(proj, request, max_out)
    return _charge(proj, model)


def project_continuity(auditor, plan, model_id: str) -> Projection:
    """Project the continuity suite's calls of ``model_id`` (no pilot): every sweep's greedy
    answers plus each estimator's samples (docs/definitions.md §10), sweeps the model cannot take
    left out, each call costed with :func:`estimate_tokens`; calls the response cache answers
    cost nothing."""
    from flipgate.continuity.run import SweepRunner
    from flipgate.continuity.sweeps import SWEEPS

    model = auditor.config.models[model_id]
    proj = Projection(model_id, suite="continuity")
    if model["backend"] != "litellm":
        return proj
    require_prices(auditor.config.models, [model_id])  # before the work
    runner, backend = SweepRunner(auditor, plan), auditor.backend(model_id)
    max_out = plan.max_new_tokens
    for sweep in plan.sweeps:
        modality = SWEEPS[sweep].modality
        if (modality == "image" and not backend.supports_images) or modality == "audio":
            continue  # skipped: no images (API models take no audio)
        inputs = runner.inputs(sweep)
        requests = [c.request for c in runner.greedy_calls(sweep, inputs)]
        sampler = runner.sampler(model_id)
        for estimator in plan.estimators:
            sampled = [c.request for c in runner.sampled_calls(inputs, estimator)]
            for request in _uncached(auditor, sampler, sampled):
                _add_call(proj, request, max_out)
        for request in _uncached(auditor, model_id, requests):
            _add_call(proj, request, max_out)
    return _charge(proj, model)


def project_decomposition(auditor, plan, model_id: str) -> list[Projection]:
    """Project the readout decomposition suite's calls (no pilot): every variant of every item
    on every axis, and with the judge readout one judgement per trial (K calls each under
    ``audit.judge_consensus``) charged to the judge, its reply estimated at ~4 characters a
    token of the model's ``max_new_tokens``. Calls the response cache answers cost nothing."""
    from flipgate.decomposition.run import DecompositionRunner, axis_cell
    from flipgate.judge.choice import choice_request, choice_requests, load_agreement_set
    from flipgate.paraphrases import ParaphraseStore

    cfg = auditor.config
    runner = DecompositionRunner(auditor, plan, ParaphraseStore.load(plan.paraphrases))
    judge_id = runner.judge_id(model_id)
    require_prices(cfg.models, [model_id, judge_id])  # before the work
    readouts = runner.readouts(model_id)[0]
    model, judge = cfg.models[model_id], cfg.models[judge_id]
    own = Projection(model_id, suite="readouts")
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
            for q in _uncached(auditor, judge_id, gate):
                _add_call(judged, q, judge_out)
    for spec in plan.datasets:
        for axis_name in plan.axes:
            axis = runner.axis(axis_name)
            for it in runner.items(spec):
                for v in axis.variants(it):
                    key = (spec.name, it.item_id, axis_cell(axis_name), v.condition, 0)
                    req = v.render(it, key, "cloze" in readouts)
                    if model["backend"] == "litellm":
                        _add_call(own, req, max_out, len(_uncached(auditor, model_id, [req])))
                    if paid_judge:
                        options = [it.options[s] for s in v.perm]
                        for q in choice_requests(
                            it.question, req.labels, options, reply, cfg.judge_consensus, cfg.seed
                        ):
                            _add_call(judged, q, judge_out)
    both = [own] if judged is own else [own, judged]
    return [_charge(p, cfg.models[p.model_id]) for p in both if p.n_calls]


def _charge(proj: Projection, model: dict) -> Projection:
    """``proj`` with its USD at ``model``'s price (priced already: :func:`require_prices`)."""
    price = price_per_token(model)
    assert price is not None, f"{proj.model_id}: no price (require_prices first)"
    proj.usd = price[0] * proj.tokens_in + price[1] * proj.tokens_out
    return proj


def _add_call(proj: Projection, request: Request, max_out: int, times: int = 1) -> None:
    t_in, t_out = estimate_tokens(request, max_out)
    proj.n_calls += times
    proj.tokens_in += times * t_in
    proj.tokens_out += times * t_out


def check_budget(projections: list[Projection], budget: float) -> str:
    """A table of projections; raises :class:`BudgetRefused` (carrying the table) when the projected
    spend, the pilot's included, is over ``budget`` USD or a model has no known price."""
    lines = [
        f"{'model':32} {'suite':8} {'calls':>8} {'tokens in':>12} {'tokens out':>11} {'USD':>10}"
    ]
    for p in projections:
        cost = f"{p.usd:10.4f}" if p.priced else "   no price"
        lines.append(
            f"{p.model_id:32} {p.suite:8} {p.n_calls:8d} {p.tokens_in:12.0f} "
            f"{p.tokens_out:11.0f} {cost}"
        )
    pilot = sum(p.pilot_usd for p in projections)
    total = sum(p.usd for p in projections) + pilot
    lines.append(
        f"{'projected total':32} {'':8} {'':8} {'':12} {'':11} {total:10.4f}  "
        f"(budget {usd(budget)}; "
        f"includes the pilot's {pilot:.4f} on {sum(p.pilot_calls for p in projections)} calls)"
    )
    table = "\n".join(lines)
    unpriced = [p.model_id for p in projections if not p.priced]
    if unpriced:
        raise BudgetRefused(
            f"cost guard: no price known for {', '.join(unpriced)}: add `price: {{input_per_mtok: "
            f".., output_per_mtok: ..}}` (USD per million tokens) to its entry in models.yaml",
            table,
        )
    if total > budget:
        raise BudgetRefused(
            f"cost guard: projected cost {usd(total)} USD exceeds --budget {usd(budget)}; "
            f"the run was not started",
            table,
        )
    return table


@dataclass
class GuardPlan:
    """The API-calling parts of a session: order-suite models (and their judge) and the envelope's
    roster (``envelope`` is None when its suite is not collected)."""

    order: list[str] = field(default_factory=list)
    judge: list[str] = field(default_factory=list)
    envelope: object = None
    roster: list[str] = field(default_factory=list)
    #: the judge consensus suite's plan (``audit.judges``) and its judge models
    judges: object = None
    judge_models: list[str] = field(default_factory=list)
    #: the readout decomposition's plan (``audit.decomposition``) and its models
    decomposition: object = None
    readout_models: list[str] = field(default_factory=list)
    #: the continuity suite's plan (``audit.continuity``) and its models
    continuity: object = None
    continuity_models: list[str] = field(default_factory=list)


def guard(auditor, plan: GuardPlan, budget: float, pilot_items: int, out: Path) -> str:
    """The whole cost guard: prices first (no call), then the envelope projection (no call,
    reserved), then the budget-capped pilot and projection of the order suites. Writes ``out``
    (JSON, also on refusal) and returns the projection table; raises :class:`BudgetRefused`."""
    require_prices(
        auditor.config.models,
        [
            *plan.order,
            *plan.judge,
            *plan.roster,
            *plan.judge_models,
            *plan.readout_models,
            *plan.continuity_models,
        ],
    )  # before any call
    ledger = Ledger(budget)
    projections: list[Projection] = []

    def write(**extra) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps(
                {
                    "budget_usd": budget,
                    "pilot_usd": ledger.usd,
                    "pilot_calls": ledger.calls,
                    **extra,
                    "models": [p.to_dict() for p in projections],
                },
                indent=1,
            )
        )

    try:
        projections += [project_envelope(auditor, plan.envelope, m) for m in plan.roster]
        projections += [project_judges(auditor, plan.judges, m) for m in plan.judge_models]
        for m in plan.readout_models:
            projections += project_decomposition(auditor, plan.decomposition, m)
        projections += [
            project_continuity(auditor, plan.continuity, m) for m in plan.continuity_models
        ]
        ledger.reserved = sum(p.usd for p in projections)
        projections += [project(auditor, m, pilot_items, ledger) for m in plan.order]
        table = check_budget(projections, budget)
    except BudgetRefused as exc:
        write(refused=str(exc))
        raise
    write()
    return table
