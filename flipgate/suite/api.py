"""The suite API: everything a suite gives the core, and the one module a suite imports.

The core (the pytest plugin, the session, the cost guard, the progress display, the cards and the
thresholds and models.yaml checks) iterates :mod:`flipgate.registry`. A suite is an instance of a
subclass of :class:`Suite` that defines the :data:`REQUIRED` members (a name, its cases, how a
case is measured) and overrides any default that does not fit; a package outside flipgate adds
one through the ``flipgate.suites`` entry-point group (docs/architecture.md). A case's
:class:`Measurement` is decided, stored, reported and asserted by the core's cell loop
(flipgate.suite.cell_loop.run_cell, where :class:`SuiteCell`, :class:`Measurement` and
:class:`Gated` are defined; this module re-exports them). flipgate's own suites also give
flipgate.cards.build.TypedCardSuite, the typed fields of the GRID card that they fill (the cards
name no suite).

No suite is imported here; this module sits with the core services (docs/architecture.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

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
    "facet_requests",
    "mean_estimate",
]

from flipgate.suite.cell_loop import Gated, Measurement, SuiteCell

if TYPE_CHECKING:
    from flipgate.backends import Request
    from flipgate.calls import Auditor
    from flipgate.config import AuditConfig
    from flipgate.cost import Ledger, Projection
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
    #: names it had before (a suite renamed keeps its users' files valid): still read where a
    #: user writes its name, as a model's ``suites:`` entry, a test module's ``SUITE`` and a
    #: threshold's ``facet:``, and read as :attr:`name` (its :attr:`facet` for ``facet:``)
    former_names: tuple[str, ...] = ()
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
        under an installed package when the first part names one (``flipgate_suites/order``:
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
            "neither requests() nor project() (flipgate.suite.api.Suite)"
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
                    "requests() are is unknown; define project() (flipgate.suite.api.Suite)"
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


def facet_requests(auditor: Auditor, dataset: str, facet: str) -> list[Request]:
    """The requests of ``facet``'s cell on ``dataset``: its items, each under the K orderings of
    the run's manifest, rendered as the order suite asks them (flipgate.facet_plan), so a suite can
    ask a model the same prompts (the response cache then answers them once)."""
    return auditor.plans.cell_requests(dataset, facet)[1]
