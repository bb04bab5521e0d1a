"""The flipgate pytest plugin: options, suite parametrisation, per-worker auditor, session-end
cards.

Suite tests declare ``FACET = "<facet or control>"`` at module level and take the ``flip_cell``
fixture; the plugin parametrises them over every (model, dataset) in models.yaml, one xdist group
per model, so each worker loads a model once.
"""

from __future__ import annotations

import os

import pytest

from flipgate import FlipgateError
from flipgate.exitcodes import USAGE_ERROR
from flipgate.gate_ledger import MODELS_PROPERTY, GateLedger
from flipgate.session import SESSION_KEY, FlipgateSession, record_calls

CELL_FIXTURE = "flip_cell"
ENVELOPE_FIXTURE = "envelope_cell"
ODI_FIXTURE = "odi_cell"
REGRESSION_FIXTURE = "regression_cell"
DECOMPOSITION_FIXTURE = "decomposition_cell"
JUDGE_FIXTURE = "judge_cell"
CONTINUITY_FIXTURE = "continuity_cell"


def pytest_addoption(parser):
    g = parser.getgroup("flipgate", "flipgate model-card conformance suite")
    g.addoption("--models", default="models.yaml", help="models under audit (default: models.yaml)")
    g.addoption(
        "--thresholds", default="thresholds", help="thresholds directory (default: thresholds/)"
    )
    g.addoption(
        "--items-per-dataset", type=int, default=None, help="override audit.items_per_dataset"
    )
    g.addoption(
        "--baseline",
        default=None,
        metavar="PATH",
        help="compare with a previous run (reports/runs/<run_id>, reports/baseline or its "
        "trials.sqlite)",
    )
    g.addoption(
        "--candidate",
        default=None,
        metavar="MODEL",
        help="with --baseline: compare only this model (default: every order-suite model)",
    )
    g.addoption(
        "--baseline-partial",
        action="store_true",
        help="compare cells on the (item, ordering) pairs both versions share instead of refusing "
        "them",
    )
    g.addoption(
        "--allow-ungated",
        action="store_true",
        help="accept cells that no threshold can fail and declared cells that were skipped (by "
        "default each makes the run a usage error, exit 4: nothing was checked)",
    )
    g.addoption(
        "--cache-dir", default=".flipgate_cache", help="response cache and dequantised models"
    )
    g.addoption("--no-cache", action="store_true", help="do not read or write the response cache")
    g.addoption(
        "--reset-cache",
        action="store_true",
        help="move the response cache aside (to responses.sqlite.corrupt-<time> when it is "
        "corrupt, .reset-<time> otherwise) and start a fresh one",
    )
    g.addoption(
        "--fresh-controls",
        action="store_true",
        help="measure the same-ordering controls' noise floor again with new replicate seeds "
        "(a rerun otherwise replays it from the response cache)",
    )
    g.addoption(
        "--progress",
        choices=("auto", "bar", "lines", "off"),
        default="auto",
        help="live progress of the run's trials (planned vs answered, per model, trials/s, ETA): "
        "a bar on a terminal, a line every 30 s in a log (auto), or off",
    )
    g.addoption("--grid-cards-dir", default="grid_cards", help="where GRID cards are written")
    g.addoption(
        "--runs-dir", default="reports/runs", help="where per-run trials stores are written"
    )
    g.addoption("--manifests-dir", default="fixtures/manifests", help="permutation manifests")
    g.addoption(
        "--envelope",
        default="suites/benchmarks/envelopes/default.yaml",
        help="configuration envelope for suites/benchmarks (docs/definitions.md §7)",
    )
    g.addoption(
        "--budget",
        type=float,
        default=None,
        help="USD: pilot API models, project the run's cost, refuse to start when over",
    )
    g.addoption(
        "--pilot-items",
        type=int,
        default=3,
        help="items per cell in the cost-guard pilot (default 3)",
    )


class _XdistHooks:
    """Hands the controller's run id to every worker."""

    def __init__(self, config):
        self.config = config

    def pytest_configure_node(self, node):
        node.workerinput["flipgate_run_id"] = FlipgateSession.of(self.config).run_id
        node.workerinput["flipgate_dist"] = self.config.option.dist


class _BadInputStatus:
    """Controller: a flipgate input error (a FlipgateError at collection or in a cell, here or on a
    worker: bad config, unreadable data, a failed backend) ends the run with the usage-error
    status, so CI can tell "could not run" from "a gate failed"."""

    def __init__(self):
        self.seen = False

    def pytest_collectreport(self, report):
        if report.failed and str(report.longrepr).startswith("flipgate: "):
            self.seen = True

    def pytest_runtest_logreport(self, report):
        if report.failed and str(report.longrepr).startswith("flipgate: "):
            self.seen = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        if self.seen:
            session.exitstatus = USAGE_ERROR


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "flipgate_cell: a flipgate conformance cell (facet/control × model × dataset)"
    )
    session = FlipgateSession.start(config)
    if config.getoption("verbose") <= 0:  # model-loading bars (GGUF, weights) only with -v;
        os.environ.setdefault("TQDM_DISABLE", "1")  # workers inherit it when they start
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if session.is_worker:
        if config.workerinput.get("flipgate_dist") == "loadgroup":
            config.option.loadgroup = True  # workers parse argv only; tag items with their group
        return
    config.pluginmanager.register(_BadInputStatus(), "flipgate-bad-input")
    config.pluginmanager.register(
        GateLedger(allow_ungated=config.getoption("--allow-ungated")), "flipgate-gate-ledger"
    )
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(config), "flipgate-xdist")
        if getattr(config.option, "numprocesses", None) and getattr(
            config.option, "dist", "no"
        ) in ("no", "load"):
            config.option.dist = "loadgroup"  # one group per (model, facet, dataset): _group
        config.option.loadscopereorder = False  # groups in the order of _schedule_order
    if config.getoption("--baseline") is not None or config.getoption("--candidate") is not None:
        session.check_baseline()


def _audit_config(config):
    """models.yaml, checked once (:meth:`FlipgateSession.audit_config`); at collection a bad input
    is one collection error naming the file and field."""
    try:
        return FlipgateSession.of(config).audit_config()
    except FlipgateError as exc:
        raise pytest.Collector.CollectError(f"flipgate: {exc}") from None


def _skipped(case_id: str, reason: str) -> list:
    """The one parameter of a suite with nothing to run: a skipped case that says why."""
    return [pytest.param(None, id=case_id, marks=pytest.mark.skip(reason=reason))]


def _parametrise_envelope(metafunc):
    cfg = _audit_config(metafunc.config)
    try:
        envelope = FlipgateSession.of(metafunc.config).envelope()
    except FlipgateError as exc:
        raise pytest.Collector.CollectError(f"flipgate: {exc}") from None
    roster = envelope.roster or cfg.audited("envelope")
    params = [
        pytest.param(
            spec,
            id=spec.name,
            # one group per benchmark: the benchmarks of an envelope run on separate workers
            marks=[pytest.mark.xdist_group(f"envelope-{spec.name}"), pytest.mark.flipgate_cell],
        )
        for spec in envelope.benchmarks
    ]
    if not roster:
        params = _skipped(
            "no-roster",
            f"no model in {metafunc.config.getoption('--models')} lists suite 'envelope'",
        )
    metafunc.parametrize(ENVELOPE_FIXTURE, params, indirect=True)


def _parametrise_suite(
    metafunc, fixture: str, suite: str, section: str, plan, cases: list[tuple], group
) -> None:
    """One case per (model with ``suite`` in its suites, ``*case``) for the cases of
    ``audit.<section>`` (``plan``); ``group(model_id, *case)`` names its xdist group. Nothing to
    run is one skipped case that says why."""
    cfg = _audit_config(metafunc.config)
    params = [
        pytest.param(
            (model_id, *case),
            id="-".join((model_id, *case)),
            marks=[pytest.mark.xdist_group(group(model_id, *case)), pytest.mark.flipgate_cell],
        )
        for model_id in cfg.audited(suite)
        for case in (cases if plan is not None else ())
    ]
    if not params:
        why = (
            f"{cfg.path} declares no audit.{section}"
            if plan is None
            else f"no model in {cfg.path} lists suite {suite!r}"
        )
        params = _skipped("not-declared", why)
    metafunc.parametrize(fixture, params, indirect=True)


def _parametrise_decomposition(metafunc):
    """(model with suite 'readouts', dataset, axis) of ``audit.decomposition``; the axes of a
    (model, dataset) share one xdist group (their canonical variant is one call)."""
    plan = _audit_config(metafunc.config).decomposition
    cases = [(spec.name, axis) for spec in plan.datasets for axis in plan.axes] if plan else []
    _parametrise_suite(
        metafunc,
        DECOMPOSITION_FIXTURE,
        "readouts",
        "decomposition",
        plan,
        cases,
        lambda m, dataset, axis: f"{m}/decomposition/{dataset}",
    )


def _parametrise_judges(metafunc):
    """(model with suite 'judges', dataset of ``audit.judges``), each its own xdist group
    (different prompts, nothing shared)."""
    plan = _audit_config(metafunc.config).judges
    cases = [(spec.name,) for spec in plan.datasets] if plan else []
    _parametrise_suite(
        metafunc, JUDGE_FIXTURE, "judges", "judges", plan, cases, lambda m, d: f"{m}/judge/{d}"
    )


def _parametrise_continuity(metafunc):
    """(model with suite 'continuity', sweep, estimator); a model's sweep is one xdist group, so
    its estimators share the greedy answers through the response cache."""
    plan = _audit_config(metafunc.config).continuity
    cases = [(sw, est) for sw in plan.sweeps for est in plan.estimators] if plan else []
    _parametrise_suite(
        metafunc,
        CONTINUITY_FIXTURE,
        "continuity",
        "continuity",
        plan,
        cases,
        lambda m, sweep, estimator: f"{m}/continuity/{sweep}",
    )


def _parametrise_odi(metafunc):
    """One ODI fit over every order-suite model: its own xdist group, since it reads every model."""
    _audit_config(metafunc.config)
    metafunc.parametrize(
        ODI_FIXTURE,
        [
            pytest.param(
                "order",
                id="order-facets",
                marks=[pytest.mark.xdist_group("odi"), pytest.mark.flipgate_cell],
            )
        ],
        indirect=True,
    )


def _group(model_id: str, cell: str, dataset: str) -> str:
    """The xdist group of a cell: a facet cell, its control and its regression cases share one
    (the first of them to run measures the facet's trials, the others read them back); groups of
    one model run on both workers, each loading the model once."""
    from flipgate.cell import Cell

    return f"{model_id}/{Cell.parse(cell).facet}/{dataset}"


def _schedule_rank(item) -> int:
    """Largest work first, so the last group to finish is a small one: envelope benchmarks, then
    cells of free-form facets (long generations), then the other cells; ODI, which reads every
    order cell, last."""
    from flipgate.cell import Cell
    from flipgate.facets import get_facet
    from flipgate.facets.short_answer import ShortAnswerFacet

    params = getattr(getattr(item, "callspec", None), "params", {})
    if ENVELOPE_FIXTURE in params:
        return 0
    if ODI_FIXTURE in params:
        return 3
    cell = params.get(CELL_FIXTURE)
    if isinstance(cell, tuple):
        free_form = isinstance(get_facet(Cell.parse(cell[0]).facet), ShortAnswerFacet)
        return 1 if free_form else 2
    return 2


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, if it is active
def pytest_collection_modifyitems(config, items):
    """Every process sorts the collection the same way (:func:`_schedule_rank`, stable), and
    xdist hands groups out in that order (``loadscopereorder`` off). Each cell carries the
    models it gates (:data:`flipgate.gate_ledger.MODELS_PROPERTY`) to the controller's ledger."""
    items.sort(key=_schedule_rank)
    for item in items:
        models = _gated_models(item)
        if models:
            item.user_properties.append((MODELS_PROPERTY, models))


def _gated_models(item) -> list[str]:
    """The model a cell gates (none for the panel-wide envelope and ODI cells, and for the
    placeholder of a suite with nothing to run, whose parameter is None)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    cell = params.get(CELL_FIXTURE)
    if isinstance(cell, tuple):
        return [cell[1]]
    regression = params.get(REGRESSION_FIXTURE)
    if isinstance(regression, tuple):
        return [regression[0].candidate]
    for fixture in (DECOMPOSITION_FIXTURE, JUDGE_FIXTURE, CONTINUITY_FIXTURE):
        case = params.get(fixture)
        if isinstance(case, tuple):
            return [case[0]]
    return []


def _cell_label(cell: str, dataset: str) -> str:
    return f"{cell.replace(':', '-')}-{dataset}"


def _compared_cells(cfg, pairing) -> list[tuple[str, str]]:
    """The candidate's cells; in one run only those its baseline is audited on too."""
    mine = cfg.cells(pairing.candidate)
    return (
        mine if pairing.run is not None else [c for c in mine if c in cfg.cells(pairing.baseline)]
    )


def _parametrise_regression(metafunc):
    """One case per (candidate, baseline, cell), in the xdist group of the candidate's cell (which
    measures it)."""
    cfg = _audit_config(metafunc.config)
    params = [
        pytest.param(
            (p, cell, dataset),
            id=f"{p.label}-{_cell_label(cell, dataset)}",
            marks=[
                pytest.mark.xdist_group(_group(p.candidate, cell, dataset)),
                pytest.mark.flipgate_cell,
            ],
        )
        for p in FlipgateSession.of(metafunc.config).pairings or []
        for cell, dataset in _compared_cells(cfg, p)
    ]
    if not params:
        params = _skipped(
            "no-baseline",
            f"no baseline: name one with `baseline: <model id>` in {cfg.path} or pass "
            "--baseline PATH",
        )
    metafunc.parametrize(REGRESSION_FIXTURE, params, indirect=True)


def pytest_generate_tests(metafunc):
    if REGRESSION_FIXTURE in metafunc.fixturenames:
        return _parametrise_regression(metafunc)
    if ENVELOPE_FIXTURE in metafunc.fixturenames:
        return _parametrise_envelope(metafunc)
    if ODI_FIXTURE in metafunc.fixturenames:
        return _parametrise_odi(metafunc)
    if DECOMPOSITION_FIXTURE in metafunc.fixturenames:
        return _parametrise_decomposition(metafunc)
    if JUDGE_FIXTURE in metafunc.fixturenames:
        return _parametrise_judges(metafunc)
    if CONTINUITY_FIXTURE in metafunc.fixturenames:
        return _parametrise_continuity(metafunc)
    if CELL_FIXTURE not in metafunc.fixturenames:
        return
    from flipgate.cell import Cell
    from flipgate.facets import CONTROLS, FACETS

    name = getattr(metafunc.module, "FACET", None)
    if name not in FACETS and name not in CONTROLS:
        raise pytest.Collector.CollectError(
            f"flipgate: {metafunc.module.__file__}: FACET = {name!r} is not a known facet or "
            "control "
            f"(known: {', '.join(sorted(list(FACETS) + list(CONTROLS)))})"
        )
    cfg = _audit_config(metafunc.config)
    if name in CONTROLS:
        cells = [
            (Cell(facet=f, control=name).name, f"{f}-{d.name}", d.name)
            for f, d in cfg.controls.get(name, [])
        ]
    else:
        cells = [(name, d.name, d.name) for d in cfg.facets.get(name, [])]
    params = [
        pytest.param(
            (cell, model_id, dataset),
            id=f"{model_id}-{label}",
            marks=[
                pytest.mark.xdist_group(_group(model_id, cell, dataset)),
                pytest.mark.flipgate_cell,
            ],
        )
        for model_id in cfg.audited("order")
        for cell, label, dataset in cells
        if (cell, dataset) in cfg.cells(model_id)
    ]
    if not params:  # e.g. an opt-in facet that models.yaml does not list
        why = (
            f"no dataset declared for it in {cfg.path} (audit.facets / audit.controls)"
            if not cells
            else f"no model in {cfg.path} lists suite 'order'"
            if not cfg.audited("order")
            else f"no order-suite model of {cfg.path} takes it (see the models' facets: / "
            "datasets:)"
        )
        params = _skipped("not-declared", f"{name}: {why}")
    metafunc.parametrize(CELL_FIXTURE, params, indirect=True)


@pytest.fixture(scope="session")
def flipgate_auditor(request):
    """This process's :class:`~flipgate.audit.Auditor` (models load once per worker); its API call
    counts are stored at teardown."""
    try:
        auditor = FlipgateSession.of(request.config).auditor()
    except FlipgateError as exc:  # e.g. a trials store or response cache it cannot open
        from flipgate.suite import fail_input

        fail_input(exc)
    yield auditor
    record_calls(auditor, os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.fixture
def envelope_cell(request, flipgate_auditor):
    """One benchmark of the configuration envelope over the roster; call ``.run()``."""
    from flipgate.envelope.cell import EnvelopeCell

    return EnvelopeCell(
        flipgate_auditor,
        FlipgateSession.of(request.config).thresholds_dir,
        FlipgateSession.of(request.config).envelope(),
        request.param,
        request.config.pluginmanager.getplugin("capturemanager"),
    )


@pytest.fixture
def regression_cell(request, flipgate_auditor):
    """A candidate vs its baseline on one cell (docs/definitions.md §11); call ``.run()``."""
    from flipgate.regression.cell import RegressionCell

    pairing, cell, dataset = request.param
    return RegressionCell(
        flipgate_auditor,
        FlipgateSession.of(request.config).thresholds_dir,
        pairing,
        cell,
        dataset,
        request.config.getoption("--baseline-partial"),
        request.config.pluginmanager.getplugin("capturemanager"),
    )


def _suite_cell(request, auditor, make, plan):
    """``make(auditor, thresholds dir, plan, *case, capture manager)`` for a suite cell whose
    case is ``request.param`` (parametrised only when ``plan`` is declared)."""
    assert plan is not None
    return make(
        auditor,
        FlipgateSession.of(request.config).thresholds_dir,
        plan,
        *request.param,
        request.config.pluginmanager.getplugin("capturemanager"),
    )


@pytest.fixture
def decomposition_cell(request, flipgate_auditor):
    """One (model, dataset, axis) cell of the readout decomposition; call ``.run()``."""
    from flipgate.decomposition.cell import DecompositionCell

    plan = FlipgateSession.of(request.config).audit_config().decomposition
    return _suite_cell(request, flipgate_auditor, DecompositionCell, plan)


@pytest.fixture
def judge_cell(request, flipgate_auditor):
    """One (judge model, dataset) cell of the judge consensus suite; call ``.run()``."""
    from flipgate.judge.cell import JudgeCell

    plan = FlipgateSession.of(request.config).audit_config().judges
    return _suite_cell(request, flipgate_auditor, JudgeCell, plan)


@pytest.fixture
def continuity_cell(request, flipgate_auditor):
    """One (model, sweep, estimator) cell of the continuity suite; call ``.run()``."""
    from flipgate.continuity.cell import ContinuityCell

    plan = FlipgateSession.of(request.config).audit_config().continuity
    return _suite_cell(request, flipgate_auditor, ContinuityCell, plan)


@pytest.fixture
def odi_cell(request, flipgate_auditor):
    """The ODI fit over the order suites' trials of every model; call ``.run()``."""
    from flipgate.odi.cell import ODICell

    return ODICell(
        flipgate_auditor,
        FlipgateSession.of(request.config).thresholds_dir,
        request.config.pluginmanager.getplugin("capturemanager"),
    )


def pytest_sessionstart(session):
    """Controller only: with ``--budget``, the cost guard (:func:`_guard`); then the live progress
    display."""
    state = FlipgateSession.of(session.config)
    if state.is_worker:
        return
    if not session.config.option.collectonly:
        _check_storage(session.config, state)
    if session.config.getoption("--budget") is not None:
        _guard(session.config, state)
    if not session.config.option.collectonly:
        state.start_progress()


def _check_storage(config, state) -> None:
    """The directories and the response cache this run writes (:meth:`FlipgateSession.
    check_storage`), before anything runs; a problem ends the run with one usage-error line."""
    try:
        lines = state.check_storage()
    except FlipgateError as exc:
        pytest.exit(f"flipgate: {exc}", returncode=USAGE_ERROR)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in lines if reporter is not None else []:
        reporter.write_line(line)


def _planned(items, config) -> dict:
    """Trials the collected cells plan, per (model, dataset, cell) (flipgate/progress.py)."""
    from flipgate.envelope.run import planned_trials
    from flipgate.progress import (
        Plan,
        cell_plan,
        continuity_plan,
        decomposition_plan,
        judge_plan,
        odi_plan,
        without_images,
    )

    state = FlipgateSession.of(config)
    plan: Plan = {}
    for item in items:
        if not item.get_closest_marker("flipgate_cell") or item.get_closest_marker("skip"):
            continue
        params = item.callspec.params
        cfg, n = state.audit_config(), state.items_override
        if isinstance(params.get(CELL_FIXTURE), tuple):
            cell, model_id, dataset = params[CELL_FIXTURE]
            plan |= cell_plan(cfg, n, model_id, cell, dataset)
        elif isinstance(params.get(REGRESSION_FIXTURE), tuple):
            pairing, cell, dataset = params[REGRESSION_FIXTURE]
            models = [pairing.candidate] + ([pairing.baseline] if pairing.run is None else [])
            for model_id in filter(None, models):
                plan |= cell_plan(cfg, n, model_id, cell, dataset)
        elif ODI_FIXTURE in params:
            plan |= odi_plan(cfg, n)
        elif isinstance(params.get(DECOMPOSITION_FIXTURE), tuple):
            plan |= decomposition_plan(cfg, n, *params[DECOMPOSITION_FIXTURE])
        elif isinstance(params.get(JUDGE_FIXTURE), tuple):
            plan |= judge_plan(cfg, n, *params[JUDGE_FIXTURE])
        elif isinstance(params.get(CONTINUITY_FIXTURE), tuple):
            plan |= continuity_plan(cfg, n, *params[CONTINUITY_FIXTURE])
        elif params.get(ENVELOPE_FIXTURE) is not None:
            envelope = state.envelope()
            roster = envelope.roster or cfg.audited("envelope")
            roster_models = {m: cfg.models[m] for m in roster if m in cfg.models}
            plan |= planned_trials(envelope, params[ENVELOPE_FIXTURE], roster_models)
    return without_images(plan, _text_only_models(state))


def _text_only_models(state: FlipgateSession) -> set[str]:
    """Local models whose stored fingerprint (``python -m flipgate prepare``, or an earlier
    run) says they take no images, known before any model is loaded."""
    from flipgate.backends.hf import stored_fingerprint

    cache_dir = state.path("--cache-dir")
    found = set()
    for model_id, model in state.audit_config().models.items():
        if model.get("backend") != "hf":
            continue
        try:
            fingerprint = stored_fingerprint(model, cache_dir)
        except FlipgateError:  # a missing package is reported by the cells themselves
            continue
        if fingerprint is not None and not fingerprint.get("vision", True):
            found.add(model_id)
    return found


def pytest_collection_finish(session):
    """Every process that collects (each xdist worker, or the only one) writes the run's plan for
    the controller's live progress display."""
    config = session.config
    if config.option.collectonly or not session.items:
        return
    try:
        FlipgateSession.of(config).write_plan(_planned(session.items, config))
    except FlipgateError:
        pass  # a bad input is reported by the cells themselves; the display just has no plan


def _guard(config, state) -> None:
    """The cost guard (flipgate.cost.guard) before any paid call. A refusal exits with
    ``exitcodes.BUDGET_REFUSED``, bad input with ``exitcodes.USAGE_ERROR``."""
    budget = config.getoption("--budget")
    from flipgate import exitcodes
    from flipgate.cost import BudgetRefused, guard

    out = state.store_path.parent / "cost_projection.json"
    try:
        plan = state.guard_plan()
        auditor = state.auditor()
        try:
            table = guard(auditor, plan, budget, config.getoption("--pilot-items"), out)
        finally:
            record_calls(auditor, "pilot")
    except BudgetRefused as exc:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        for line in (exc.table or "").splitlines() if reporter is not None else []:
            reporter.write_line(line)
        pytest.exit(f"flipgate: {exc}", returncode=exitcodes.BUDGET_REFUSED)
    except FlipgateError as exc:
        pytest.exit(f"flipgate: {exc}", returncode=exitcodes.USAGE_ERROR)
    state.cost_lines = table.splitlines()


@pytest.fixture
def flip_cell(request, flipgate_auditor):
    """A (facet or control, model, dataset) cell; call ``.run()`` to measure and gate it."""
    from flipgate.suite import FlipCell

    name, model_id, dataset = request.param
    return FlipCell(
        flipgate_auditor,
        FlipgateSession.of(request.config).thresholds_dir,
        name,
        model_id,
        dataset,
        request.config.pluginmanager.getplugin("capturemanager"),
    )


def pytest_sessionfinish(session, exitstatus):
    """Controller only: GRID cards from the run's trials store, added to Allure."""
    state = FlipgateSession.of(session.config)
    state.stop_progress()
    if not state.is_worker and state.store_path.exists() and not state.finish(exitstatus):
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = FlipgateSession.of(config)
    for line in state.cost_lines + state.summary_lines:
        terminalreporter.write_line(line)


def pytest_unconfigure(config):
    state = config.stash.get(SESSION_KEY, None)
    if state is not None:  # an interrupted session: the display stops with it
        state.stop_progress()
