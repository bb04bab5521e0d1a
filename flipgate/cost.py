"""Cost guard (FB): a pilot on a few items per cell projects the whole run's API spend.

For every facet and control cell of a priced (API) model, the first ``pilot_items`` items are run
(through the response cache, so the pilot is not paid twice) and give the cell's tokens per prompt
character and mean output tokens; the projection applies them to every request of the full plan,
plus one judge call per item of a judged cell. Local models cost nothing and are not piloted.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from flipgate import FlipgateError
from flipgate.backends.base import Request
from flipgate.facets import get_facet, split_cell


@dataclass
class Projection:
    model_id: str
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
    import litellm

    try:
        cost_in, cost_out = litellm.cost_per_token(model=model_cfg["source"]["model"], prompt_tokens=1,
                                                   completion_tokens=1)
    except Exception:  # litellm raises for models missing from its map
        return None
    return float(cost_in), float(cost_out)


def prompt_chars(request: Request) -> int:
    return sum(len(text) for _, text in request.messages) + len(request.answer_prefix)


def project(auditor, model_id: str, pilot_items: int = 3) -> Projection:
    """Pilot ``model_id`` on the first ``pilot_items`` items of each cell and project the full run."""
    from flipgate.judge import sem_flip_request

    cfg = auditor.config
    proj = Projection(model_id)
    if cfg.models[model_id]["backend"] != "litellm":
        return proj
    price = price_per_token(cfg.models[model_id])
    if price is None:
        proj.priced = False
        price = (0.0, 0.0)
    k = cfg.k
    for name, dataset in cfg.cells():
        plan, requests = auditor.cell_requests(dataset, name)
        pilot = requests[:pilot_items * k]
        outputs, cached = auditor._outputs(model_id, pilot, use_cache=True, label=f"pilot {name}/{dataset}")
        proj.pilot_calls += sum(not hit for hit in cached)
        proj.pilot_usd += sum(o.cost_usd for o, hit in zip(outputs, cached) if not hit)
        per_char = sum(o.tokens_in for o in outputs) / max(1, sum(prompt_chars(r) for r in pilot))
        mean_out = sum(o.tokens_out for o in outputs) / max(1, len(outputs))
        todo = requests if split_cell(name)[0] is not None else requests[len(pilot):]  # controls bypass the cache
        proj.n_calls += len(todo)
        proj.tokens_in += per_char * sum(prompt_chars(r) for r in todo)
        proj.tokens_out += mean_out * len(todo)
        if getattr(get_facet(split_cell(name)[1]), "judged", False):
            answer = "x" * int(4 * mean_out)  # ~4 characters a token
            judge_id = cfg.judge or model_id
            items = {it.item_id: it for it, *_ in plan}
            judge_chars = sum(prompt_chars(sem_flip_request(it, [answer] * k)) for it in items.values())
            judge_price = price_per_token(cfg.models[judge_id]) or price
            proj.n_calls += len(items)
            proj.usd += judge_price[0] * per_char * judge_chars + judge_price[1] * len(items)
    proj.usd += price[0] * proj.tokens_in + price[1] * proj.tokens_out
    return proj


def check_budget(projections: list[Projection], budget: float) -> str:
    """A table of projections; raises FlipgateError (with the table) when over ``budget`` USD or a
    model has no known price."""
    lines = [f"{'model':32} {'calls':>8} {'tokens in':>12} {'tokens out':>11} {'USD':>10}"]
    for p in projections:
        usd = f"{p.usd:10.4f}" if p.priced else "   no price"
        lines.append(f"{p.model_id:32} {p.n_calls:8d} {p.tokens_in:12.0f} {p.tokens_out:11.0f} {usd}")
    total = sum(p.usd for p in projections)
    lines.append(f"{'projected total':32} {'':8} {'':12} {'':11} {total:10.4f}  (budget {budget:.4f}; pilot spent "
                 f"{sum(p.pilot_usd for p in projections):.4f} on {sum(p.pilot_calls for p in projections)} calls)")
    table = "\n".join(lines)
    unpriced = [p.model_id for p in projections if not p.priced]
    if unpriced:
        raise FlipgateError(f"cost guard: no price known for {', '.join(unpriced)}; add "
                            f"`price: {{input_per_mtok: ..., output_per_mtok: ...}}` to models.yaml\n{table}")
    if total > budget:
        raise FlipgateError(f"cost guard: projected cost {total:.4f} USD exceeds --budget {budget:.4f}; "
                            f"the run was not started\n{table}")
    return table
