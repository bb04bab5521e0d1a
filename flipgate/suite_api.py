"""The suite API: everything a suite gives the core, and the one module a suite imports.

The core (the pytest plugin, the session, the cost guard, the progress display, the cards and the
thresholds and models.yaml checks) iterates :mod:`flipgate.registry`. A suite is an instance of a
subclass of :class:`Suite` that defines the :data:`REQUIRED` members (a name, its cases, how a
case is measured) and overrides any default that does not fit; a package outside flipgate adds
one through the ``flipgate.suites`` entry-point group (docs/architecture.md). A case's
:class:`Measurement` is decided, stored, reported and asserted by the core's cell loop
(flipgate.suite.run_cell). flipgate's own suites also give :class:`TypedCardSuite`, the typed
fields of the GRID card that they fill (the cards name no suite).

No suite is imported here; this module sits with the core services (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from flipgate import FlipgateError

__all__ = [
    "Case",
    "FlipgateError",
    "Gated",
    "GatedCell",
    "Measurement",
    "MetricSpec",
    "NoCases",
    "REQUIRED",
    "Suite",
    "SuiteCell",
    "SuiteContext",
    "mean_estimate",
]

if TYPE_CHECKING:
    from flipgate.audit import Auditor
    from flipgate.backends import Request
    from flipgate.cards.build import CardContext
    from flipgate.cards.model import GridCard
    from flipgate.config import AuditConfig, Threshold, ThresholdSet
    from flipgate.cost import Ledger, Projection
    from flipgate.results import Verdict
    from flipgate.store import TrialStore

#: planned trials per (model id, dataset, cell), the live progress display's unit
Plan = dict[tuple[str, str, str], int]


#: when the cases that read every order cell run (:attr:`Case.rank`): ODI and the regression
#: cases, after the order suite's cells (1, 2) and the envelope (3), whose two large independent
#: cells take the workers that free up while the last order cells finish, so ODI does not wait
#: for them (measured on the AVX2 class: ODI right after the order cells waited 35 s for the
#: GGUF entry's cell; last, it had left one worker idle for 90 s)
READS_ORDER_CELLS = 4
#: the suites that read no order cell and are not the envelope: after ODI, filling the other
#: worker while it fits, the largest groups first (the decomposition's, one per dataset, ~1.5 min
#: on the AVX2 class; continuity's and the judges' small groups one rank later, so the last to
#: finish is small: with the decomposition last one worker waited 29 s for the other)
AFTER_ODI = 5


@dataclass(frozen=True)
class Case:
    """One parametrised cell of a suite: ``param`` is what :meth:`Suite.cell` and
    :meth:`Suite.planned` get back; ``id`` its pytest id; ``group`` its xdist group (cells that
    share work share a group, so one worker loads the model and answers once); ``models`` the
    models whose gate it decides (none for a panel-wide cell) on ``dataset`` (what a threshold's
    ``dataset:`` selects: a dataset, benchmark or sweep); ``rank`` when it is scheduled (lower
    first): the order suite's cells (1, 2), the envelope (3), ODI and the regression cases, which
    read the order cells (:data:`READS_ORDER_CELLS`), then the other suites (:data:`AFTER_ODI`),
    so one worker fits ODI while the other runs them and the last group to finish is a small
    one."""

    param: Any
    id: str
    group: str
    models: tuple[str, ...] = ()
    dataset: str = ""
    rank: int = 2


@dataclass(frozen=True)
class NoCases:
    """A suite with nothing to run in this configuration: one skipped case named ``id`` that
    says ``reason`` (the gate ledger counts it as skipped, never as passed)."""

    id: str
    reason: str


@dataclass(frozen=True)
class MetricSpec:
    """A metric thresholds may name on a suite's cells (``facet:`` :attr:`Suite.facet`), and
    the range its values take (a bound outside it is refused when the thresholds file is read).
    """

    name: str
    low: float = -math.inf
    high: float = math.inf
    #: what may follow ``@`` in a threshold's metric: the values it may take (e.g. the axes:
    #: ``genuine_flip_rate@paraphrase``), ``"number"`` for a number in [0, 1] that it must have
    #: (``cfr@0.5``), None when nothing may
    at: tuple[str, ...] | Literal["number"] | None = None
    #: what the ``@`` part names, for messages ("axis", "facet", "θ")
    at_name: str = ""
    #: a metric other cells report too (``parse_rate``): thresholds may name it with this
    #: suite's facet, but it is not the suite's own
    shared: bool = False
    #: the ``vs:`` a threshold on this metric must carry, and only it may (the regression
    #: suite's paired deltas: ``baseline``)
    vs: str | None = None


@dataclass(frozen=True)
class GatedCell:
    """A cell of models.yaml's whole plan that thresholds may select (the collection-time check
    that no threshold gates nothing): ``cell`` is what a threshold's ``facet:`` names, ``part``
    what a metric's ``@`` selects (a decomposition axis; None: ``@`` selects no cell)."""

    model: str
    cell: str
    dataset: str
    readouts: tuple[str, ...] = ()
    #: "baseline" for a regression comparison of the cell (docs/definitions.md §11)
    vs: str | None = None
    part: str | None = None
    #: a panel-wide cell (the ODI fit): it alone does not give a model a check
    panel: bool = False


@dataclass
class Gated:
    """One model's part of a cell's :class:`Measurement` that thresholds decide. The core
    (:func:`flipgate.suite.run_cell`) reads the model's thresholds once per session, decides
    them and stores the verdicts under (``model``, ``dataset``, ``cell``).

    By default the core applies the thresholds that select ``select`` (``cell`` when None) on
    ``dataset`` (with ``vs``), those ``applies`` keeps, to ``estimates`` (``{readout: {metric:
    MetricEstimate}}``; ``readout`` is the primary one): a ``lower``/``upper`` threshold on a
    metric with per-item values in ``sequences`` (``{(readout, metric): ItemValues}``) is decided
    by the one-sided tests of docs/definitions.md §12 on the look grid ``looks`` of a cell that
    drew sequentially (fixed N otherwise; ``planned``: the items fixed-N tests wait for), any other
    by its interval; ``context`` goes to every verdict (its ``facet`` is the selector unless
    ``context`` names one). A suite whose thresholds reach its estimates in a way of its own (a
    readout or a CI level per threshold) gives ``decide``, which the core calls with the model's
    thresholds instead."""

    model: str
    dataset: str
    cell: str
    estimates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    readout: str = ""
    select: str | None = None
    vs: str | None = None
    applies: Callable[[Threshold], bool] | None = None
    sequences: Mapping[tuple[str, str], Any] | None = None
    looks: Any = None
    planned: int | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    decide: Callable[[ThresholdSet], list[Verdict]] | None = None


@dataclass
class Measurement:
    """What a cell measured, for the core to decide, store, report and assert
    (:func:`flipgate.suite.run_cell`): its ``gated`` parts; ``record`` stores what it measured
    besides the verdicts (called once they are decided, so a record may carry them); ``report``
    attaches it to Allure with the verdicts; ``not_applicable``: the cell is reported and then
    skipped with this reason (never a pass); ``failure``: reported, then the cell fails with
    this reason and any violated threshold."""

    gated: list[Gated]
    record: Callable[[TrialStore], None] | None = None
    report: Callable[[list[Verdict]], None] | None = None
    not_applicable: str | None = None
    failure: str | None = None


class SuiteCell:
    """The base of a suite's cell: a subclass sets ``auditor`` and ``thresholds_dir`` (and
    ``capture_manager`` to show live progress) and gives :meth:`measure`; :meth:`run`, what the
    test calls, is the core's cell loop (:func:`flipgate.suite.run_cell`): decide, store, report
    to Allure and assert."""

    auditor: Auditor
    thresholds_dir: str
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def measure(self) -> Measurement:
        """Measure the cell (model calls through :attr:`auditor`)."""
        raise NotImplementedError(f"{type(self).__name__} does not define measure()")

    def thresholds(self, model_id: str) -> ThresholdSet:
        """``model_id``'s thresholds, read once per session."""
        return self.auditor.thresholds(model_id, self.thresholds_dir)

    def live_output(self) -> contextlib.AbstractContextManager:
        """A context in which the live progress display reaches the terminal."""
        cm = self.capture_manager
        return cm.global_and_fixture_disabled() if cm is not None else contextlib.nullcontext()

    def run(self) -> list[Verdict]:
        from flipgate.suite import run_cell

        return run_cell(self)


class SuiteContext(Protocol):
    """What the core hands a suite (flipgate.session builds it): the checked inputs of this
    run, without pytest."""

    @property
    def root(self) -> Path:
        """The project directory (models.yaml, thresholds/, suites/ resolve against it)."""
        ...

    @property
    def thresholds_dir(self) -> str:
        """The thresholds directory of this run (``--thresholds``)."""
        ...

    @property
    def items_override(self) -> int | None:
        """``--items-per-dataset``, None when not given."""
        ...

    @property
    def invocation_dir(self) -> Path:
        """The directory pytest was started in (a path option a user typed resolves against it
        where it names an earlier run, e.g. ``--baseline``)."""
        ...

    def audit_config(self) -> AuditConfig:
        """models.yaml, parsed and checked once."""
        ...

    def plan(self, suite: str) -> Any:
        """The parsed ``audit.<config_key>`` of ``suite`` (:meth:`Suite.parse`), None when
        models.yaml does not declare it."""
        ...

    def text_only_models(self) -> set[str]:
        """Models known before any is loaded to take no images (their stored fingerprint says
        so): a suite plans no trials for their image inputs (they are skipped as unmeasurable)."""
        ...

    def option(self, name: str) -> Any:
        """A command-line option's value (``--envelope``, ``--baseline-partial``, ...)."""
        ...

    def path(self, option: str) -> Path:
        """A path option, resolved against :attr:`root`."""
        ...

    def memo(self, key: str, make: Any) -> Any:
        """``make()`` once per process for ``key`` (e.g. a suite's parsed input file)."""
        ...


class Suite:
    """A suite (docs/architecture.md): subclass it. Three members are required
    (:data:`REQUIRED`): :attr:`name`, :meth:`cases` and :meth:`measure` (or :meth:`cell`, which
    makes a cell of its own); every other member has a default here that a suite overrides
    where it does not fit. One ``name`` everywhere: a model lists it under ``suites:`` in
    models.yaml, a test module names it with ``SUITE = "<name>"`` (and takes the
    ``flipgate_cell`` fixture), thresholds select its cells with ``facet: <name>``, the gate
    ledger, the progress plan and the card count its cells under it."""

    #: the suite's one name (required)
    name: str
    #: the heading of its section in the GRID card's Markdown (:meth:`card_markdown`); its name
    #: when empty
    title: str = ""
    #: the key of its settings under ``audit:`` in models.yaml (None: it has none)
    config_key: str | None = None
    #: JSON Schema of ``audit.<config_key>``, merged into models.yaml's schema (None: the
    #: shipped schema already describes it)
    schema: dict | None = None
    #: the metrics thresholds may name on its cells
    metrics: tuple[MetricSpec, ...] = ()
    #: True when :meth:`project` pays for a pilot (it is projected after the suites that only
    #: reserve, so the pilot knows what is left of the budget)
    piloted: bool = False

    @property
    def facet(self) -> str | None:
        """The value of a threshold's ``facet:`` that selects its cells: its name. flipgate's
        order suite and regression suite give None: thresholds name their metrics on the facets'
        cells (``vs: baseline`` for the regression suite's)."""
        return self.name

    @property
    def test_dirs(self) -> tuple[str, ...]:
        """The folders whose test modules run it (``suites/<name>``): under the project root, or
        under an installed package when the first part names one (``flipgate_suites/facets``:
        the suites flipgate ships); the cost guard prices a suite only when the run may collect
        one of them (every suite when none exists)."""
        return (f"suites/{self.name}",)

    def parse(self, spec: dict, where: str, config: AuditConfig) -> Any:
        """``audit.<config_key>`` (already valid against :attr:`schema`) as the suite's plan;
        ``where`` names the file and field for a one-line error (a FlipgateError). By default
        the settings as they are."""
        return spec

    def configure(self, ctx: SuiteContext) -> None:
        """Checks before anything is collected (the controller, at pytest's configure): a
        FlipgateError is the run's one-line usage error (e.g. a bad ``--baseline``). What it
        reads it may keep with ``ctx.memo``. By default nothing."""

    def cases(self, ctx: SuiteContext, part: str | None) -> list[Case] | NoCases:
        """Its parametrisation (required): every cell this run would measure. A suite whose tests
        are spread over several modules gets the module's ``PART`` (e.g. the order suite's
        facet; None when the module declares none) and returns that part's cells; an unknown part
        is a FlipgateError. ``part=None`` asks for every part (the thresholds check)."""
        raise NotImplementedError(f"suite {self.name!r} defines no cases()")

    def measure(self, cell: SuiteCell, param: Any) -> Measurement:
        """Measure the case ``param`` (of one of :meth:`cases`) with ``cell``'s auditor (its
        model calls), thresholds and live output, for the core to decide, store, report and
        assert (required unless :meth:`cell` is overridden)."""
        raise NotImplementedError(f"suite {self.name!r} defines no measure()")

    def cell(
        self, ctx: SuiteContext, param: Any, auditor: Auditor, capture_manager: Any
    ) -> SuiteCell:
        """The cell of a case: a :class:`SuiteCell` whose ``run()`` (the test's) is the core's
        cell loop. By default one that calls :meth:`measure`."""
        return CaseCell(self, param, auditor, ctx.thresholds_dir, capture_manager)

    def gated(self, ctx: SuiteContext) -> list[GatedCell]:
        """Its cells over models.yaml's whole plan (not the ``-k`` selection), for the
        collection-time check of the thresholds files: a threshold must select one of them. By
        default each model of each of :meth:`cases` on the case's dataset."""
        cases = self.cases(ctx, None)
        return [
            GatedCell(model, self.facet or self.name, case.dataset)
            for case in (cases if isinstance(cases, list) else [])
            for model in case.models
        ]

    def planned(self, ctx: SuiteContext, param: Any) -> Plan:
        """Trials the case will record, for the live progress display (none by default)."""
        return {}

    def requests(self, auditor: Auditor, param: Any) -> list[Request]:
        """The model calls the case ``param`` makes to each of its models (for the cost guard's
        default :meth:`project`)."""
        from flipgate import FlipgateError

        raise FlipgateError(
            f"suite {self.name!r}: the cost guard (--budget) cannot price its calls: it defines "
            "neither requests() nor project() (flipgate.suite_api.Suite)"
        )

    def project(self, ctx: SuiteContext, auditor: Auditor, ledger: Ledger) -> list[Projection]:
        """The paid calls this run would make, priced (flipgate.cost): the cost guard sums them
        against ``--budget`` before any cell runs. By default the :meth:`requests` of every case,
        less those the response cache answers, at each model's price; a case that would call
        models but names none (a panel-wide case) is refused, as its calls have no price."""
        from flipgate.cost import project_calls

        cases = self.cases(ctx, None)
        calls: dict[str, list[Request]] = {}
        for case in cases if isinstance(cases, list) else []:
            requests = self.requests(auditor, case.param)
            if requests and not case.models:
                raise FlipgateError(
                    f"suite {self.name!r}: the cost guard (--budget) cannot price case "
                    f"{case.id!r}: it names no models (Case.models), so whose calls its "
                    "requests() are is unknown; define project() (flipgate.suite_api.Suite)"
                )
            for model_id in case.models:
                calls.setdefault(model_id, []).extend(requests)
        return [project_calls(auditor, self.name, m, found) for m, found in calls.items()]

    def card_section(self, store: TrialStore, model_id: str, dataset: str) -> dict | None:
        """Its section of the (model, dataset) GRID card (JSON data), None when it has none. By
        default the first record it stored for them (``store.add_suite_record``)."""
        records = store.suite_records(self.name, model_id, dataset)
        return records[0] if records else None

    def card_markdown(self, section: dict) -> list[str]:
        """The Markdown lines of :meth:`card_section`'s section. By default a heading
        (:attr:`title`) and a table of its fields."""
        rows = [f"| {key} | {value} |" for key, value in section.items()]
        return [f"## {self.title or self.name}", "", "| field | value |", "|---|---|", *rows, ""]

    def summary_lines(self, store: TrialStore) -> list[str]:
        """Lines for the terminal summary at the end of the run. By default how many records it
        stored."""
        rows = store.suite_records(self.name)
        return [f"flipgate: {self.name}: {len(rows)} cell(s) recorded"] if rows else []


#: the members a suite must define itself (:meth:`Suite.cell` in place of :meth:`Suite.measure`
#: makes a cell of its own)
REQUIRED = ("name", "cases", "measure")


@dataclass
class CaseCell(SuiteCell):
    """The cell of a case of a suite that gives :meth:`Suite.measure`."""

    suite: Suite
    param: Any
    auditor: Auditor
    thresholds_dir: str
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def measure(self) -> Measurement:
        return self.suite.measure(self, self.param)


def mean_estimate(values: list[float], cell: SuiteCell, cluster: list | None = None) -> Any:
    """The mean of per-answer ``values`` with its bootstrap CI at the run's settings (level,
    draws, seed), resampling whole ``cluster``s (e.g. items) when given: a
    :class:`~flipgate.results.MetricEstimate` to put in :attr:`Gated.estimates`."""
    from flipgate.summary import mean_estimate as estimate

    cfg = cell.auditor.config
    return estimate(values, cfg.bootstrap_n, cfg.level, cfg.seed, cluster=cluster)


@runtime_checkable
class TypedCardSuite(Protocol):
    """What flipgate's own suites give the GRID cards besides :class:`Suite`'s generic
    ``suites`` section: their sections are typed fields of :class:`~flipgate.cards.model.GridCard`
    (its checked-in schema names them), so only they give these members, and a suite from another
    package, which cannot add a typed field, need not (flipgate.cards builds with what a suite that
    is one gives, and skips one that is not). flipgate/suite_base.py's ``TypedCardSection`` holds
    the defaults: no cells, fields, card, lines or pages."""

    #: where its card comes in the search for the card of a dataset no facet or control cell ran
    #: on (:meth:`own_card`): lower first
    own_card_rank: int

    def owns_cell(self, cell: str) -> bool:
        """True for a trials-store cell (``facet`` column) that it records: not a facet cell of
        the card."""
        ...

    def card_fields(self, ctx: CardContext) -> dict[str, Any]:
        """The GridCard fields it fills on the card of ``ctx.model_id`` on ``ctx.dataset`` (e.g.
        ``{"judge_consensus": JudgeConsensusSection}``), and any axis-receipt fields (e.g.
        ``envelope_rules_sha256``); empty where it has none."""
        ...

    def own_card(self, ctx: CardContext, sections: dict[str, Any]) -> GridCard | None:
        """The card of a dataset that no facet or control cell ran on, where it audited it (built
        with :meth:`CardContext.suite_card`), else None; ``sections`` are the GridCard fields every
        suite's :meth:`card_fields` gave the card."""
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
