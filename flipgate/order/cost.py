"""The order suite's cost projection (flipgate.cost prices it): a budget-capped pilot of each API
model on the first items of each cell, projected to the full plan, plus the judge calls of judged
facets."""

from __future__ import annotations

from flipgate.backends.base import prompt_chars
from flipgate.cell import CellKey
from flipgate.cost import (
    BudgetRefused,
    Ledger,
    Projection,
    estimate_usd,
    price_per_token,
    require_prices,
    uncached,
    usd,
)
from flipgate.facets import get_facet


def project(
    auditor, model_id: str, pilot_items: int = 3, ledger: Ledger | None = None
) -> Projection:
    """Pilot ``model_id`` on the first ``pilot_items`` items of each cell and project the full run;
    raises :class:`BudgetRefused` before a cell whose pilot could take ``ledger`` past its
    budget."""
    from flipgate.judging import sem_flip_request
    from flipgate.judging.permuted import judge_runs

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
        plan, requests = auditor.plans.cell_requests(dataset, name)
        pilot = requests[: pilot_items * k]
        fresh = uncached(auditor, model_id, pilot)
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
        cell = CellKey.parse(name)
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
