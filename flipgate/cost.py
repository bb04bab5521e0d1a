"""Cost guard (flipbench): refuse a run whose API spend would exceed ``--budget``, before spending
it.

Every API model the selected suites call needs a known price (``price`` in models.yaml or litellm's
bundled price map, read by :mod:`flipgate.backends.price_map`); one without is refused before any
call. Each suite prices its own calls (``Suite.project``, flipgate/suite/api.py) with the helpers
here. A suite without a pilot (``piloted`` false; e.g. the envelope suite,
flipgate/envelope/cost.py) is projected from its request plan, each call costed with the
conservative estimate below (:func:`add_call`, :func:`charge`; :func:`uncached` leaves out what the
response cache answers), and makes no call; its USD is reserved before any pilot. The order suite is
piloted (:func:`project`): for every facet and control cell of an order-suite API model, the first
``pilot_items`` items are run (through the response cache, so the pilot is not paid twice) and give
the cell's tokens per prompt character and mean output tokens; the projection applies them to every
request of the full plan, plus one judge call per item of a judged cell. The pilot itself is capped
by the budget: before each cell's pilot, its uncached calls are costed conservatively
(:func:`estimate_tokens`: 1 token per 2 prompt characters, plus per-message and per-image
allowances, and the full max output tokens) and piloting stops, refusing the run, before a cell
whose pilot could take the spend past the budget; a budget too small for any pilot makes no call.
The pilot's spend counts against the budget. Local models cost nothing and are not piloted. A
refusal is :class:`BudgetRefused` (exit status ``exitcodes.BUDGET_REFUSED``).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import functools
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flipgate import FlipgateError
from flipgate.backends.base import Request, estimate_tokens
from flipgate.backends.price_map import map_price


def usd(x: float) -> str:
    """A USD amount for messages: 4 decimals, or 3 significant digits below 0.0001."""
    return f"{x:.4f}" if x == 0 or abs(x) >= 1e-4 else f"{x:.3g}"


def budget_option(text: str) -> float:
    """``--budget``'s value: a finite, non-negative USD amount (argparse type: anything else is
    pytest's usage error, exit 4, naming the option and the value)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a budget: give a finite number of USD, 0 or more"
        )
    return value


def positive_int_option(text: str) -> int:
    """A count option's value (``--pilot-items``): a whole number, 1 or more (argparse type, as
    :func:`budget_option`)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: give a whole number, 1 or more")
    return value


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
    #: USD already committed by suites projected without a pilot
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
    """(USD per input token, per output token): ``price`` in models.yaml, else litellm's bundled
    price map, read without importing litellm for the names it answers from the map alone
    (:func:`flipgate.backends.price_map.map_price`: the answer of litellm's ``cost_per_token``
    for one token of each); (0, 0) for local backends; None when an API model has no known
    price."""
    if model_cfg["backend"] != "litellm":
        return 0.0, 0.0
    if model_cfg.get("price"):
        p = model_cfg["price"]
        return p["input_per_mtok"] / 1e6, p["output_per_mtok"] / 1e6
    return map_price(model_cfg["source"]["model"])


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


def estimate_usd(requests: list[Request], price: tuple[float, float], max_out: int) -> float:
    """Conservative USD for ``requests`` (see :func:`estimate_tokens`)."""
    return sum(
        price[0] * t_in + price[1] * t_out
        for t_in, t_out in (estimate_tokens(r, max_out) for r in requests)
    )


def uncached(auditor, model_id: str, requests: list[Request]) -> list[Request]:
    """The requests the response cache cannot answer (all of them without a cache)."""
    if auditor.cache is None:
        return requests
    keys = auditor.cache_keys(model_id, requests)
    found = auditor.cache.get_many(keys)
    return [r for r, k in zip(requests, keys) if k not in found]


def charge(proj: Projection, model: dict) -> Projection:
    """``proj`` with its USD at ``model``'s price (priced already: :func:`require_prices`)."""
    price = price_per_token(model)
    assert price is not None, f"{proj.model_id}: no price (require_prices first)"
    proj.usd = price[0] * proj.tokens_in + price[1] * proj.tokens_out
    return proj


def add_call(proj: Projection, request: Request, max_out: int, times: int = 1) -> None:
    """Count ``times`` calls of ``request`` in ``proj``, each at :func:`estimate_tokens`."""
    t_in, t_out = estimate_tokens(request, max_out)
    proj.n_calls += times
    proj.tokens_in += times * t_in
    proj.tokens_out += times * t_out


def project_calls(auditor, suite: str, model_id: str, requests: list[Request]) -> Projection:
    """``requests`` of ``model_id`` as one suite's projection: every call of a local model
    (free; its backend is not loaded to ask the cache), an API model's calls that the response
    cache cannot answer, at its price (refused when it has none: :func:`require_prices`)."""
    model = auditor.config.models[model_id]
    proj = Projection(model_id, suite=suite)
    paid = model["backend"] == "litellm"
    if paid:
        require_prices(auditor.config.models, [model_id])
    max_out = int(model.get("max_new_tokens", 16))
    for request in uncached(auditor, model_id, requests) if paid else requests:
        add_call(proj, request, max_out)
    return charge(proj, model)


def check_budget(projections: list[Projection], budget: float) -> str:
    """A table of projections; raises :class:`BudgetRefused` (carrying the table) when the projected
    spend, the pilot's included, is over ``budget`` USD, a model has no known price, or a
    projection is impossible (negative or not a number: it would pass any budget)."""
    w = max([8] + [len(p.suite) for p in projections])  # the suite column fits every name
    lines = [
        f"{'model':32} {'suite':{w}} {'calls':>8} {'tokens in':>12} {'tokens out':>11} {'USD':>10}"
    ]
    for p in projections:
        cost = f"{p.usd:10.4f}" if p.priced else "   no price"
        lines.append(
            f"{p.model_id:32} {p.suite:{w}} {p.n_calls:8d} {p.tokens_in:12.0f} "
            f"{p.tokens_out:11.0f} {cost}"
        )
    pilot = sum(p.pilot_usd for p in projections)
    total = sum(p.usd for p in projections) + pilot
    lines.append(
        f"{'projected total':32} {'':{w}} {'':8} {'':12} {'':11} {total:10.4f}  "
        f"(budget {usd(budget)}; "
        f"includes the pilot's {pilot:.4f} on {sum(p.pilot_calls for p in projections)} calls)"
    )
    table = "\n".join(lines)
    impossible = [
        p
        for p in projections
        if not all(
            math.isfinite(v) and v >= 0 for v in (p.tokens_in, p.tokens_out, p.usd, p.pilot_usd)
        )
    ]
    if impossible:  # the backend checks usage (flipgate/backends/api.py); an older cache may not
        named = ", ".join(
            f"{p.model_id} (tokens in {p.tokens_in:.4g}, out {p.tokens_out:.4g}, USD {p.usd:.4g})"
            for p in impossible
        )
        raise BudgetRefused(
            f"cost guard: impossible projection for {named}: replies with impossible usage "
            f"(negative or not a number) are in the response cache; --reset-cache starts a "
            f"fresh one; the run was not started",
            table,
        )
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


def _declared_suite(module: Path) -> str | None:
    """The suite a test module names (a top-level ``SUITE = "<name>"``), read without importing
    it; None when it names none (or not as a literal)."""
    try:
        source = module.read_bytes()
        if b"SUITE" not in source:  # most of a project's own tests: no need to parse them
            return None
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return None  # pytest reports it when it collects it
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "SUITE" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def declared_suites(session) -> set[str]:
    """The suites named by the test modules the session's arguments (or ``testpaths``) reach,
    wherever those modules lie: a checkout's ``suites/``, the installed ``flipgate_suites`` (with
    ``--pyargs``), a project's own folder. Folders and files pytest would not collect
    (``--ignore``, ``norecursedirs``, a virtualenv) are skipped; modules are parsed, not
    imported."""
    config = session.config
    patterns = config.getini("python_files")

    def ignored(path: Path) -> bool:
        return bool(config.hook.pytest_ignore_collect(collection_path=path, config=config))

    names: set[str] = set()
    for arg in config.args:
        top = session._argument_path(str(arg).split("::")[0])
        if top.is_file():
            modules = [top]
        else:
            modules = []
            for folder, subfolders, files in os.walk(top):
                subfolders[:] = sorted(d for d in subfolders if not ignored(Path(folder, d)))
                modules += [
                    Path(folder, f)
                    for f in sorted(files)
                    if any(fnmatch.fnmatch(f, p) for p in patterns) and not ignored(Path(folder, f))
                ]
        names.update(n for n in map(_declared_suite, modules) if n is not None)
    return names


def guard(auditor, ctx: Any, suites: list, budget: float, out: Path) -> str:
    """The whole cost guard over the ``suites`` this run may collect (flipgate.suite.api.Suite
    objects, with ``ctx`` their SuiteContext): first those that project
    without calling (:attr:`~flipgate.suite.api.Suite.piloted` false; their USD is reserved),
    then the piloted ones, whose budget-capped pilots spend what is left. Every suite checks its
    models' prices before its first call. Writes ``out`` (JSON, also on refusal) and returns the
    projection table; raises :class:`BudgetRefused`."""
    ledger = Ledger(budget)
    projections: list[Projection] = []

    def write(**extra) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps(
                {
                    "budget_usd": budget,
                    "suites": [s.name for s in suites],
                    "pilot_usd": ledger.usd,
                    "pilot_calls": ledger.calls,
                    **extra,
                    "models": [p.to_dict() for p in projections],
                },
                indent=1,
            )
        )

    try:
        for suite in suites:
            if not suite.piloted:
                projections += suite.project(ctx, auditor, ledger)
        ledger.reserved = sum(p.usd for p in projections)
        for suite in suites:
            if suite.piloted:
                projections += suite.project(ctx, auditor, ledger)
        table = check_budget(projections, budget)
    except BudgetRefused as exc:
        write(refused=str(exc))
        raise
    write()
    return table


@functools.lru_cache(maxsize=4)
def _priced_suites(projection: Path) -> frozenset[str]:
    try:
        return frozenset(json.loads(projection.read_text()).get("suites", ()))
    except (OSError, ValueError):
        return frozenset()


def require_priced(projection: Path, suite: str) -> None:
    """Raise :class:`BudgetRefused` when the run's cost guard (its ``projection`` file,
    cost_projection.json) did not price ``suite``: a cell of it would make calls that no
    projection counted, so it makes none."""
    if suite not in _priced_suites(projection):
        raise BudgetRefused(
            f"cost guard: the {suite} suite was collected but not priced ({projection}), so "
            f"its cells make no call: name it as a literal in its test module "
            f"(SUITE = {suite!r}) for the guard to find it"
        )
