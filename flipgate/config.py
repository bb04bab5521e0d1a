"""models.yaml and thresholds/*.yaml: loading and jsonschema validation.

Every error names the file, the path inside it and the offending value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from flipgate import SHOWN_CHARS, FlipgateError, not_utf8, short
from flipgate.cell import CellKey
from flipgate.facets import CONTROLS, FACETS
from flipgate.items.registry import DatasetSpec, refuse_repeated
from flipgate.metrics.consensus import ConsensusSettings
from flipgate.metrics.sequential import SequentialSettings
from flipgate.redact import refuse_key_as_name
from flipgate.results import Direction
from flipgate.yamlio import load_strict

SCHEMAS = Path(__file__).parent / "config_schemas"
#: metrics only a control cell (e.g. ``facet: same_ordering``) has
CONTROL_METRICS = ("flip_rate_same", "delta_order", "ordering_excess_share")


#: suites other packages registered (flipgate.registry declares them here): their ``suites:`` name
#: and threshold metrics are read through the generic paths below
EXTERNAL_SUITES: dict[str, Any] = {}  # name -> flipgate.suite.api.Suite (typed there)
#: every registered suite, flipgate's own too, in the registry's order (flipgate.registry declares
#: them here when it loads them): models.yaml takes each one's ``audit.<config_key>`` settings,
#: checked against its schema fragment and parsed by the suite itself
SUITES: dict[str, Any] = {}
#: loads the registry (flipgate.registry sets it when imported), so that reading models.yaml
#: through this module alone still knows every suite
_suite_loader: Callable[[], object] | None = None


def declare_suite(suite: Any, external: bool) -> None:
    SUITES[suite.name] = suite
    if external:
        EXTERNAL_SUITES[suite.name] = suite


def set_suite_loader(load: Callable[[], object] | None) -> None:
    global _suite_loader
    _suite_loader = load


def declared_suites() -> list[Any]:
    """Every registered suite (flipgate.registry loads them on first use)."""
    if not SUITES and _suite_loader is not None:
        _suite_loader()
    if not SUITES:
        raise FlipgateError(
            "no suite is registered: import flipgate.registry before reading models.yaml "
            "(python -m flipgate and the pytest plugin do)"
        )
    return list(SUITES.values())


def _renamed(name: str) -> Any:
    """The suite once called ``name`` (:attr:`flipgate.suite.api.Suite.former_names`), or None."""
    return next((s for s in declared_suites() if name in s.former_names), None)


def current_suite_name(name: str) -> str:
    """``name``, or the name of the suite that was once called ``name`` (models.yaml
    ``suites: [readouts]`` reads as ``decomposition``)."""
    renamed = _renamed(name)
    return renamed.name if renamed is not None else name


def current_facet(facet: str) -> str:
    """A threshold's ``facet:``, or the facet of the suite once called ``facet``
    (``facet: judge`` reads as ``judges``)."""
    renamed = _renamed(facet)
    return renamed.facet if renamed is not None and renamed.facet is not None else facet


#: what may follow "@" in a metric whose MetricSpec says ``at="number"``: a number in [0, 1]
_NUMBER_0_1 = r"(0(\.[0-9]+)?|1(\.0+)?)"


def _shipped_schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _schema(name: str) -> dict:
    """A shipped JSON Schema with the suites' parts merged in: every suite's ``audit.<config_key>``
    fragment (:attr:`flipgate.suite.api.Suite.schema`), the external suites' names and every
    suite's former names among a model's ``suites:``, and their metrics."""
    schema = _shipped_schema(name)
    if name == "models":
        model = schema["properties"]["models"]["items"]["properties"]
        model["suites"]["items"]["enum"] += list(EXTERNAL_SUITES) + [
            former for s in declared_suites() for former in s.former_names
        ]
        audit = schema["properties"]["audit"]["properties"]
        for suite in declared_suites():
            if suite.config_key is not None:
                audit[suite.config_key] = suite.schema or {"type": "object"}
    elif name == "thresholds":
        metric = schema["properties"]["thresholds"]["items"]["properties"]["metric"]
        specs = [m for s in declared_suites() for m in s.metrics]
        metric["anyOf"][0]["enum"] = list(dict.fromkeys(m.name for m in specs if m.at != "number"))
        for m in specs:
            if m.at is not None:
                at = _NUMBER_0_1 if m.at == "number" else "[a-z0-9_]+"
                metric["anyOf"].append({"type": "string", "pattern": f"^{m.name}@{at}$"})
    return schema


def suite_cells() -> tuple[str, ...]:
    """The ``facet:`` values that name a suite's own cells (``odi``, ``envelope``, ...), every
    registered suite's; facets and controls are not among them."""
    return tuple(s.facet for s in declared_suites() if s.facet is not None)


#: the most items per dataset a run may ask for (models.yaml and ``--items-per-dataset``)
MAX_ITEMS_PER_DATASET: int = _shipped_schema("models")["properties"]["audit"]["properties"][
    "items_per_dataset"
]["maximum"]


def _path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _is_integer(_checker, instance: object) -> bool:
    """JSON Schema "integer" as a user means it: an int, not 6.0 and not true."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _pattern(validator, pattern: str, instance: object, _schema: dict):
    """``pattern`` with ECMA-262's ``$`` (the end of the string): Python's ``$`` also matches
    before a trailing newline, so ``"smol\\n"`` would pass ``^[a-z]+$``."""
    if not isinstance(instance, str):
        return
    strict = (
        pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    )
    if not re.search(strict, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


def _check_finite(data: object, path: Path, parts: tuple = ()) -> None:
    """Refuse NaN and ±inf anywhere in a parsed file (no field of any file takes them)."""
    if isinstance(data, float) and not math.isfinite(data):
        raise FlipgateError(
            f"{path}: field {_path(parts)}: not a finite number (value: {data!r}); write a number"
        )
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        _check_finite(value, path, (*parts, key))


def _schema_error(path: Path, error: jsonschema.ValidationError) -> str:
    """One error as ``file: field path: message (value: ...)``, the value cut short."""
    shown = short(error.instance)
    message = error.message.replace(repr(error.instance), shown)
    if len(message) > 2 * SHOWN_CHARS:
        message = message[: 2 * SHOWN_CHARS - 3] + "..."
    value = "" if isinstance(error.instance, (dict, list)) else f" (value: {shown})"
    if error.validator in ("minItems", "minProperties") and not error.instance:
        # ``facets: {}`` once read as "the default plan": an empty collection declares nothing
        kind = "list" if isinstance(error.instance, list) else "mapping"
        value = (
            f"; an empty {kind} declares nothing and is not read as the default: fill it, or "
            f"leave the field out where it has a default"
        )
    return f"{path}: field {_path(error.absolute_path)}: {message}{value}"


def read_yaml(path: Path | str, schema_name: str) -> dict:
    """Parse (strictly: :func:`flipgate.yamlio.load_strict`) and validate a YAML file; raise a
    one-line FlipgateError naming file, field and value."""
    path = Path(path)
    if not path.is_file():
        raise FlipgateError(f"{path}: file not found")
    try:
        data = load_strict(path.read_text(encoding="utf-8"), path)
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    _check_finite(data, path)
    validator = _Validator(_schema(schema_name))
    # best_match descends into oneOf/anyOf branches to the error that names the real field
    errors = sorted(
        (jsonschema.exceptions.best_match([e]) for e in validator.iter_errors(data)),
        key=lambda e: list(e.absolute_path),
    )
    if errors:
        more = [_path(e.absolute_path) for e in errors[1:]]
        raise FlipgateError(
            _schema_error(path, errors[0])
            + (f"; {len(more)} more error(s) at {', '.join(more[:5])}" if more else "")
        )
    return data


@dataclass
class AuditConfig:
    """The audit plan (``audit:`` in models.yaml) and the models under audit."""

    path: Path
    models: dict[str, dict]
    seed: int = 42
    k: int = 6
    items_per_dataset: int = 30
    bootstrap_n: int = 1000
    level: float = 0.95
    facets: dict[str, list[DatasetSpec]] = field(default_factory=dict)
    #: control -> [(facet, dataset)] cells it runs on
    controls: dict[str, list[tuple[str, DatasetSpec]]] = field(default_factory=dict)
    #: model id of the LLM judge for judged facets (None: each model judges its own answers)
    judge: str | None = None
    #: answer-reading judges (sem-flip, the decomposition's judge readout) answer with the
    #: consensus of K orderings of what they are shown (``audit.judge_consensus``); None: one call
    judge_consensus: ConsensusSettings | None = None
    #: models a suite's settings name as a judge of other models' answers (besides
    #: ``audit.judge``), e.g. ``audit.decomposition.judge.model``: they need no cell of their own
    suite_judges: set[str] = field(default_factory=set)
    #: each suite's parsed ``audit.<config_key>`` (flipgate.suite.api.Suite.parse), by suite
    #: name; a suite whose settings models.yaml does not declare has none
    plans: dict[str, Any] = field(default_factory=dict)
    #: ``audit.sequential`` (docs/definitions.md §12); None: fixed N
    sequential: SequentialSettings | None = field(default_factory=SequentialSettings)
    #: model id -> {dataset: n}: a model's own cap on its cells of a dataset (a models.yaml entry's
    #: ``datasets: [{name: arc_challenge, n: 40}]``), below the dataset's
    model_caps: dict[str, dict[str, int]] = field(default_factory=dict)

    def judge_models(self) -> set[str]:
        """Models that judge other models' answers (``audit.judge`` and the suites' judges)."""
        return self.suite_judges | ({self.judge} if self.judge is not None else set())

    def audited(self, suite: str) -> list[str]:
        """Ids of the models that ``suite`` ("order" or "envelope") audits."""
        return [m for m, cfg in self.models.items() if suite in cfg["suites"]]

    def cells(self, model_id: str | None = None) -> list[tuple[str, str]]:
        """Every (facet or control cell, dataset) the audit runs, e.g.
        ("same_ordering:option_order", "mmlu"); with ``model_id``, those of that model (its
        ``facets:`` / ``datasets:`` restrict the plan)."""
        out = [(name, d.name) for name, specs in self.facets.items() for d in specs]
        out += [
            (CellKey(facet=f, control=c).name, d.name)
            for c, pairs in self.controls.items()
            for f, d in pairs
        ]
        if model_id is None:
            return out
        model = self.models[model_id]
        facets, datasets = model.get("facets"), model_datasets(model)
        return [
            (cell, d)
            for cell, d in out
            if (facets is None or CellKey.parse(cell).facet in facets)
            and (datasets is None or d in datasets)
        ]

    def dataset(self, name: str) -> DatasetSpec:
        for specs in self.facets.values():
            for spec in specs:
                if spec.name == name:
                    return spec
        raise FlipgateError(f"{self.path}: dataset {name!r} is not declared under audit.facets")

    def n_items(
        self, dataset: str, override: int | None = None, model_id: str | None = None
    ) -> int:
        """The effective N of ``dataset``: ``--items-per-dataset`` (``override``), else the
        dataset's own ``n``, else ``audit.items_per_dataset``; for ``model_id``, at most that
        model's own cap on the dataset (its entry's ``datasets: [{name, n}]``)."""
        n = override or self.dataset(dataset).n or self.items_per_dataset
        cap = self.model_caps.get(model_id or "", {}).get(dataset)
        return n if cap is None else min(n, cap)

    def datasets(self) -> list[str]:
        """Every dataset declared under audit.facets, in declaration order."""
        return list(dict.fromkeys(spec.name for specs in self.facets.values() for spec in specs))


def model_datasets(model: dict) -> list[str] | None:
    """The names of the datasets a models.yaml entry restricts its order cells to (None: all);
    ``{name, n}`` entries also cap them (:attr:`AuditConfig.model_caps`)."""
    datasets = model.get("datasets")
    if datasets is None:
        return None
    return [d["name"] if isinstance(d, dict) else d for d in datasets]


def default_readouts(model: dict) -> list[str]:
    """Local models give label log-probs and text; API models text, plus log-probs where
    declared."""
    if model["backend"] == "litellm" and not (model.get("capabilities") or {}).get("logprobs"):
        return ["regex"]
    return ["letter_logprob", "regex"]


DEFAULT_PLAN = {"option_order": {"datasets": ["mmlu", "arc_challenge", "commonsense_qa"]}}


def load_models(path: Path | str) -> AuditConfig:
    path = Path(path)
    data = read_yaml(path, "models")
    audit = data.get("audit") or {}
    models: dict[str, dict] = {}
    model_caps: dict[str, dict[str, int]] = {}
    for i, m in enumerate(data["models"]):
        mine = [
            DatasetSpec(d["name"], n=d["n"]) if isinstance(d, dict) else DatasetSpec(d)
            for d in m.get("datasets") or []
        ]
        refuse_repeated([(f"models[{i}].datasets", mine)], str(path))
        caps = {d.name: d.n for d in mine if d.n is not None}
        if caps:  # the datasets given as {name, n}
            model_caps[m["id"]] = caps
        key_env = (m.get("source") or {}).get("api_key_env")
        if isinstance(key_env, str):
            refuse_key_as_name(key_env, f"{path}: field models[{i}].source.api_key_env")
        declared = (m.get("source") or {}).get("weights")
        if declared is not None and (m["backend"] != "litellm" or m.get("server")):
            raise FlipgateError(
                f"{path}: field models[{i}].source.weights: only a litellm entry without a "
                f"server block declares its weights (flipgate digests the files it loads or "
                f"serves itself) (value: {declared!r})"
            )
        if m["id"] in models:
            raise FlipgateError(
                f"{path}: field models[{i}].id: duplicate model id (value: {m['id']!r})"
            )
        readouts = m.get("readouts") or default_readouts(m)
        primary = m.get("primary_readout", readouts[0])
        if primary not in readouts:
            raise FlipgateError(
                f"{path}: field models[{i}].primary_readout: {primary!r} is not in readouts"
            )
        models[m["id"]] = {
            **m,
            "primary_readout": primary,
            "readouts": readouts,
            "suites": list(
                dict.fromkeys(current_suite_name(s) for s in m.get("suites", ["order", "envelope"]))
            ),
        }
    facets = {}
    for name, spec in audit.get("facets", DEFAULT_PLAN).items():
        if name not in FACETS:
            raise FlipgateError(
                f"{path}: field audit.facets.{name}: unknown facet (value: {name!r}); "
                f"known: {', '.join(sorted(FACETS))}"
            )
        facets[name] = [
            DatasetSpec.parse(d, f"{path}: field audit.facets.{name}.datasets[{j}]")
            for j, d in enumerate(spec["datasets"])
        ]
    refuse_repeated([(f"audit.facets.{f}.datasets", ds) for f, ds in facets.items()], str(path))
    controls = {}
    for name, spec in audit.get("controls", {c: {} for c in CONTROLS}).items():
        if name not in CONTROLS:
            raise FlipgateError(
                f"{path}: field audit.controls.{name}: unknown control (value: {name!r}); "
                f"known: {', '.join(sorted(CONTROLS))}"
            )
        chosen = spec.get("facets") or list(facets)
        for j, f in enumerate(chosen):
            if f not in facets:
                raise FlipgateError(
                    f"{path}: field audit.controls.{name}.facets[{j}]: facet not declared under "
                    f"audit.facets (value: {f!r})"
                )
        only = set(spec.get("datasets") or [])
        declared = {d.name for f in chosen for d in facets[f]}
        for j, d in enumerate(spec.get("datasets") or []):
            if d not in declared:
                raise FlipgateError(
                    f"{path}: field audit.controls.{name}.datasets[{j}]: dataset not declared for "
                    f"its facets {chosen} (value: {d!r}); declared: {', '.join(sorted(declared))}"
                )
        controls[name] = [(f, d) for f in chosen for d in facets[f] if not only or d.name in only]
    declared = {d.name for specs in facets.values() for d in specs}
    for i, m in enumerate(data["models"]):
        for key, known in (("facets", list(facets)), ("datasets", sorted(declared))):
            for j, name in enumerate(
                (m.get("facets") if key == "facets" else model_datasets(m)) or []
            ):
                if name not in known:
                    raise FlipgateError(
                        f"{path}: field models[{i}].{key}[{j}]: not declared under audit.facets "
                        f"(value: {name!r}); declared: {', '.join(known)}"
                    )
        base = m.get("baseline")
        if base is None:
            continue
        where = f"{path}: field models[{i}].baseline"
        if base not in models:
            raise FlipgateError(
                f"{where}: no model with this id (value: {base!r}); models: {', '.join(models)}"
            )
        for who in (m["id"], base):
            if "order" not in models[who]["suites"]:
                raise FlipgateError(
                    f"{where}: {who!r} must list suite 'order' to be compared (value: {base!r})"
                )
    _refuse_baseline_cycle(path, models)
    suites = declared_suites()
    for suite in suites:
        section = suite.config_key
        if section is None or audit.get(section):
            continue
        for i, m in enumerate(data["models"]):
            if suite.name in (m.get("suites") or []):
                raise FlipgateError(
                    f"{path}: field models[{i}].suites: suite {suite.name!r} needs "
                    f"audit.{section} (its datasets) (value: {m['suites']!r})"
                )
    boot = audit.get("bootstrap") or {}
    judge = audit.get("judge")
    if judge is not None and judge not in models:
        raise FlipgateError(f"{path}: field audit.judge: no model with this id (value: {judge!r})")
    cfg = AuditConfig(
        path,
        models,
        audit.get("seed", 42),
        audit.get("k", 6),
        audit.get("items_per_dataset", 30),
        boot.get("n", 1000),
        boot.get("level", 0.95),
        facets,
        controls,
        judge,
        (
            ConsensusSettings.parse(
                audit["judge_consensus"], f"{path}: field audit.judge_consensus", audit.get("k", 6)
            )
            if audit.get("judge_consensus") is not None  # {}: on, with the defaults
            else None
        ),
    )
    cfg.sequential = SequentialSettings.parse(audit.get("sequential", True))
    cfg.model_caps = model_caps
    for suite in suites:
        section = suite.config_key
        if section is not None and audit.get(section) is not None:
            cfg.plans[suite.name] = suite.parse(
                audit[section], f"{path}: field audit.{section}", cfg
            )
            specs = getattr(cfg.plans[suite.name], "datasets", None)  # a suite's own datasets
            if specs and all(isinstance(d, DatasetSpec) for d in specs):
                refuse_repeated([(f"audit.{section}.datasets", specs)], str(path))
    return cfg


def _refuse_baseline_cycle(path: Path, models: dict[str, dict]) -> None:
    """Refuse baselines that form a cycle (``a`` the baseline of ``b`` and ``b`` of ``a``, or a
    model its own): each model is compared with its baseline's cells, so a cycle never ends
    (it was a RecursionError in every cell). Named once, from its first model in the file."""
    order = list(models)
    for start in order:
        chain = [start]
        while (base := models[chain[-1]].get("baseline")) in models and base not in chain:
            chain.append(base)
        if base not in chain:
            continue
        cycle = chain[chain.index(base) :]
        first = min(cycle, key=order.index)
        cycle = cycle[cycle.index(first) :] + cycle[: cycle.index(first)]
        raise FlipgateError(
            f"{path}: field models[{order.index(first)}].baseline: baselines form a cycle "
            f"({' → '.join([*cycle, first])}) (value: {models[first]['baseline']!r}); a baseline "
            f"is an earlier version, so a chain of baselines must end at a model without one"
        )


@dataclass(frozen=True)
class Threshold:
    """One declared bound (docs/definitions.md §5): metric ≤ max or ≥ min under a decision rule."""

    metric: str
    bound: float
    direction: Direction
    rule: str = "lower"
    facet: str | None = None
    dataset: str | None = None
    readout: str | None = None
    source: str = ""
    #: CI level the gate uses (the threshold's own ``level``, else its file's)
    level: float = 0.95
    #: the file's rationale (``why:``), shown beside the verdict
    why: str | None = None
    #: ``model:`` selector: the threshold applies to this model only
    model: str | None = None
    #: ``vs: baseline``: a regression threshold on a paired delta against the model's baseline
    #: (docs/definitions.md §11)
    vs: str | None = None

    @property
    def selectors(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (
                ("model", self.model),
                ("facet", self.facet),
                ("dataset", self.dataset),
                ("readout", self.readout),
                ("vs", self.vs),
            )
            if v
        }

    @property
    def key(self) -> tuple:
        """What an override replaces and what two thresholds of one file may not share."""
        return (
            self.metric,
            self.facet,
            self.dataset,
            self.readout,
            self.model,
            self.vs,
            self.direction,
        )

    @property
    def label(self) -> str:
        sel = ",".join(f"{k}={v}" for k, v in self.selectors.items())
        op = "<=" if self.direction == "max" else ">="
        return f"{self.metric}{'[' + sel + ']' if sel else ''} {op} {self.bound} ({self.rule})"

    def applies(self, cell: str, dataset: str) -> bool:
        """``facet`` selects a facet, a control (on any facet) or one control cell
        (``same_ordering:option_order``); without it a threshold covers every facet, not
        controls."""
        parsed = CellKey.parse(cell)
        named = suite_cells()
        if cell in named or self.facet in named:  # a suite's metrics only where named
            facet_ok = self.facet == cell
        elif self.facet is None:
            facet_ok = not parsed.is_control
        elif parsed.control:
            facet_ok = self.facet in (cell, parsed.control)
        else:
            facet_ok = self.facet == parsed.facet
        return facet_ok and self.dataset in (None, dataset)


@dataclass
class ThresholdSet:
    thresholds: list[Threshold]
    level: float = 0.95
    on_inconclusive: str = "by_rule"
    files: list[str] = field(default_factory=list)

    def for_cell(self, cell: str, dataset: str, vs: str | None = None) -> list[Threshold]:
        """Thresholds gating a cell; with ``vs="baseline"`` the regression thresholds of its
        comparison."""
        return [t for t in self.thresholds if t.vs == vs and t.applies(cell, dataset)]


#: metric -> (lowest, highest) a bound may take; rates are in [0, 1]
_RATE = (0.0, 1.0)
#: the rates a facet cell reports per readout (docs/definitions.md §3); a control cell adds
#: CONTROL_METRICS
FACET_METRICS = (
    "flip_rate",
    "osi",
    "pairwise_disagreement",
    "parse_rate",
    "accuracy",
    "acc_swing",
    "sem_flip_rate",
    "judge_parse_rate",
)
#: the range of each facet and control metric (the order suite's; every other suite declares its
#: metrics' ranges itself, flipgate.suite.api.MetricSpec)
FACET_METRIC_RANGES: dict[str, tuple[float, float]] = {
    **{m: _RATE for m in (*FACET_METRICS, "flip_rate_same")},
    "delta_order": (-1.0, 1.0),
    "ordering_excess_share": (-math.inf, 1.0),
}


def metric_range(metric: str) -> tuple[float, float]:
    """The values a metric can take (``cfr@0.5`` and ``sigma_pi@facet`` by their base name), as
    the suite that reports it declares."""
    spec = _metric_spec(metric.partition("@")[0])
    return (spec.low, spec.high) if spec is not None else (-math.inf, math.inf)


def _metric_spec(base: str, suite: Any = None) -> Any:
    """The MetricSpec called ``base`` of ``suite`` (else of the first suite with it)."""
    for s in [suite] if suite is not None else declared_suites():
        for spec in s.metrics:
            if spec.name == base:
                return spec
    return None


def _check_bound(path: Path, i: int, t: dict, direction: str) -> float:
    value = t[direction]
    where = f"{path}: field thresholds[{i}].{direction}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FlipgateError(f"{where}: a bound must be a finite number (value: {value!r})")
    lo, hi = metric_range(t["metric"])
    if not lo <= value <= hi:
        raise FlipgateError(
            f"{where}: {value!r} is outside the range of {t['metric']} [{lo:g}, {hi:g}]"
        )
    return float(value)


def _check_suite_metric(path: Path, i: int, t: dict, facet: str | None, base: str) -> None:
    """A suite's own metrics go with its ``facet:`` and only they do (with the metrics of other
    cells it reports too); a metric that must carry a ``vs:`` carries it, and only it does."""
    for suite in declared_suites():
        own = [m.name for m in suite.metrics if not m.shared and m.vs is None]
        shared = [m.name for m in suite.metrics if m.shared]
        if suite.facet is not None and (base in own) != (facet == suite.facet):
            if not (facet == suite.facet and base in shared):
                also = f", and {' / '.join(shared)}" if shared else ""
                raise FlipgateError(
                    f"{path}: field thresholds[{i}]: {suite.facet} metrics ({', '.join(own)}"
                    f"{also}) go with facet: {suite.facet} and only they do (value: metric "
                    f"{t['metric']!r}, facet {facet!r})"
                )
        for vs in {m.vs for m in suite.metrics if m.vs is not None}:
            paired = [m.name for m in suite.metrics if m.vs == vs]
            if (base in paired) != (t.get("vs") == vs):
                raise FlipgateError(
                    f"{path}: field thresholds[{i}]: {suite.name} metrics ({', '.join(paired)}) "
                    f"go with vs: {vs} and only they do (value: metric {t['metric']!r}, vs "
                    f"{t.get('vs')!r})"
                )


def _check_at(path: Path, i: int, t: dict, facet: str | None, base: str, at: str) -> None:
    """What follows ``@`` in a metric is one its suite declares (an axis, a facet, θ)."""
    owner = next((s for s in declared_suites() if s.facet is not None and s.facet == facet), None)
    spec = _metric_spec(base, owner)
    where = f"{path}: field thresholds[{i}].metric"
    if spec is None or spec.at is None:
        raise FlipgateError(
            f"{where}: {base} takes no '@' part"
            + (f" with facet: {facet}" if facet else "")
            + f" (value: {t['metric']!r})"
        )
    if spec.at != "number" and at not in spec.at:
        raise FlipgateError(
            f"{where}: unknown {spec.at_name} after '@' (value: {t['metric']!r}); known: "
            f"{', '.join(spec.at)}"
        )


def parse_thresholds(path: Path) -> tuple[list[Threshold], dict]:
    data = read_yaml(path, "thresholds")
    file_level = data.get("level", 0.95)
    out: list[Threshold] = []
    for i, t in enumerate(data["thresholds"]):
        facet = current_facet(t["facet"]) if t.get("facet") is not None else None
        cell = CellKey.parse(facet or "")
        if facet is not None and not (
            facet in FACETS
            or facet in CONTROLS
            or facet in suite_cells()
            or (cell.control in CONTROLS and cell.facet in FACETS)
        ):
            raise FlipgateError(
                f"{path}: field thresholds[{i}].facet: unknown facet (value: {facet!r}); "
                f"known: {', '.join(sorted(list(FACETS) + list(CONTROLS) + list(suite_cells())))}"
            )
        base, at_sign, at = t["metric"].partition("@")
        _check_suite_metric(path, i, t, facet, base)
        if base == "delta_delta_order" and not cell.is_control and facet not in CONTROLS:
            raise FlipgateError(
                f"{path}: field thresholds[{i}].facet: "
                f"delta_delta_order exists only in control cells; "
                f"name one, e.g. facet: same_ordering (value: {facet!r})"
            )
        if base in CONTROL_METRICS and not cell.is_control and facet not in CONTROLS:
            raise FlipgateError(
                f"{path}: field thresholds[{i}].facet: {t['metric']} exists only in control cells; "
                f"name one, e.g. facet: same_ordering (value: {facet!r})"
            )
        if at_sign:
            _check_at(path, i, t, facet, base, at)
        direction: Direction = "max" if "max" in t else "min"
        new = Threshold(
            t["metric"],
            _check_bound(path, i, t, direction),
            direction,
            t.get("rule", "lower"),
            facet,
            t.get("dataset"),
            t.get("readout"),
            f"{path.name}#{i}",
            t.get("level", file_level),
            t.get("why"),
            t.get("model"),
            t.get("vs"),
        )
        twin = next((j for j, o in enumerate(out) if o.key == new.key), None)
        if twin is not None and (out[twin].bound, out[twin].rule, out[twin].level) != (
            new.bound,
            new.rule,
            new.level,
        ):
            raise FlipgateError(
                f"{path}: field thresholds[{i}]: conflicts with thresholds[{twin}] (same metric "
                f"and selectors, different bound, rule or level: {out[twin].label} vs {new.label})"
            )
        out.append(new)
    return out, data


def threshold_files(directory: Path | str) -> list[Path]:
    """The per-model override files of a thresholds directory (every ``*.yaml`` in it but
    default.yaml). A YAML file the loader would not read (``tiny.yml``, ``tiny.YAML``, or any one
    in a subfolder, ``release/tiny.yaml``) is refused with one line naming it: an override must
    not be ignored in silence."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = sorted(
        p for p in directory.rglob("*") if p.suffix.lower() in (".yaml", ".yml") and p.is_file()
    )
    for path in found:
        if path.parent != directory:
            raise FlipgateError(
                f"{path}: a thresholds file in a subfolder, which would not be read (default.yaml "
                f"and <model id>.yaml are read from {directory} itself, not its subfolders); move "
                f"it there, or keep another set of thresholds in a folder of its own and pass that "
                f"folder with --thresholds"
            )
        if path.suffix != ".yaml":
            raise FlipgateError(
                f"{path}: thresholds files end in .yaml, and this one would not be read; "
                f"rename it {path.stem}.yaml"
            )
    return [p for p in found if p.stem != "default"]


def load_thresholds(directory: Path | str, model_id: str) -> ThresholdSet:
    """``default.yaml`` plus ``<model_id>.yaml``; an override replaces thresholds on the same
    (metric, facet, dataset, readout, model, vs, direction) and adds new ones. Thresholds naming
    another ``model:`` are left out; ones without their own ``level`` take their file's."""
    directory = Path(directory)
    threshold_files(directory)  # refuses a file it would not read (tiny.yml)
    base_path = directory / "default.yaml"
    if not base_path.exists():
        raise FlipgateError(
            f"{base_path}: file not found (the thresholds directory needs a default.yaml)"
        )
    merged, data = parse_thresholds(base_path)
    settings = {
        "level": data.get("level", 0.95),
        "on_inconclusive": data.get("on_inconclusive", "by_rule"),
    }
    files = [str(base_path)]
    override = directory / f"{model_id}.yaml"
    if override.exists():
        extra, odata = parse_thresholds(override)
        keys = {t.key for t in extra}
        merged = [t for t in merged if t.key not in keys] + extra
        settings.update({k: odata[k] for k in ("level", "on_inconclusive") if k in odata})
        files.append(str(override))
    mine = [t for t in merged if t.model in (None, model_id)]
    return ThresholdSet(mine, settings["level"], settings["on_inconclusive"], files)
