"""The flipgate pytest plugin: options, suite parametrisation, per-worker auditor, session-end
cards.

A suite test module names its suite (``SUITE = "<name>"``, and ``PART = "<part>"`` for a suite
spread over modules, e.g. the order suite's facet) and takes the ``flipgate_cell`` fixture; the
plugin parametrises it with the suite's cases (flipgate.registry, flipgate.suite.api), one xdist
group per case group, so each worker loads a model once. The plugin names no suite.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from flipgate import FlipgateError, registry
from flipgate.cli import one_line
from flipgate.cost import budget_option, positive_int_option
from flipgate.exitcodes import USAGE_ERROR
from flipgate.gate.ledger import MODELS_PROPERTY, GateLedger
from flipgate.outcomes import USAGE_ERRORS, BadInput, outcome_of, stamp
from flipgate.session import SESSION_KEY, FlipgateSession, record_calls
from flipgate.suite.api import Case, NoCases

#: the ini option naming where a bare ``pytest`` (the audit) writes its Allure results
ALLUREDIR_INI = "flipgate_alluredir"

#: the fixture every suite test takes; its module names the suite (``SUITE = "<name>"``) and,
#: for a suite spread over modules, the part it runs (``PART = "<part>"``)
CELL_FIXTURE = "flipgate_cell"


@dataclass(frozen=True)
class _Param:
    """A parametrised suite case: the suite's name and its :class:`~flipgate.suite.api.Case`."""

    suite: str
    case: Case


def pytest_addoption(parser):
    parser.addini(
        ALLUREDIR_INI,
        "with no test path on the command line (a bare `pytest`: the audit), write Allure "
        "results here (a folder flipgate creates and marks; its Allure files are deleted first), "
        "unless --alluredir is given",
        default="",
    )
    g = parser.getgroup("flipgate", "flipgate model-card conformance suite")
    g.addoption("--models", default="models.yaml", help="models under audit (default: models.yaml)")
    g.addoption(
        "--thresholds", default="thresholds", help="thresholds directory (default: thresholds/)"
    )
    g.addoption(
        "--items-per-dataset",
        type=int,
        default=None,
        help="override audit.items_per_dataset (a sequential cell's cap)",
    )
    g.addoption(
        "--fixed-n",
        action="store_true",
        help="every order cell spends items_per_dataset, as with audit.sequential: false "
        "(docs/definitions.md §12)",
    )
    g.addoption(
        "--baseline",
        default=None,
        metavar="PATH",
        help="compare with a previous run (reports/runs/<run_id>, reports/baseline or its "
        "trials.sqlite); default: the promoted baseline (flipgate baseline) beside --runs-dir "
        "(reports/baseline) when there is one; 'none': compare with no run",
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
        default=None,
        help="configuration envelope of the envelope suite (docs/definitions.md §7): a YAML file, "
        "or the name of one flipgate ships (default, sr-practice); default: default",
    )
    g.addoption(
        "--budget",
        type=budget_option,
        default=None,
        help="USD: pilot API models, project the run's cost, refuse to start when over",
    )
    g.addoption(
        "--pilot-items",
        type=positive_int_option,
        default=3,
        help="items per cell in the cost-guard pilot (default 3)",
    )


class _XdistHooks:
    """Hands the controller's run id to every worker; once the workers have ended, removes the
    folder their API backends shared the in-flight bound through (flipgate/backends/slots.py)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.slot_dirs: set[Path] = set()

    def pytest_configure_node(self, node):
        from flipgate.backends.slots import slots_dir_for

        if node.workerinput.get("testrunuid"):
            self.slot_dirs.add(slots_dir_for(str(node.workerinput["testrunuid"])))
        node.workerinput["flipgate_run_id"] = FlipgateSession.of(self.config).run_id
        node.workerinput["flipgate_dist"] = self.config.option.dist
        # xdist hands workers the command line, not options a plugin set (_default_alluredir)
        node.workerinput["flipgate_alluredir"] = getattr(
            self.config.option, "allure_report_dir", None
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        for folder in self.slot_dirs:
            shutil.rmtree(folder, ignore_errors=True)


class _BadInputStatus:
    """Controller: a flipgate input error (a FlipgateError at collection or in a cell, here or on a
    worker: bad config, unreadable data, a failed backend) ends the run with the usage-error
    status, so CI can tell "could not run" from "a gate failed". A cell's report carries its
    typed outcome (flipgate.outcomes); a collection error is one of flipgate's own
    ``CollectError``s, whose message starts ``flipgate: ``."""

    def __init__(self):
        self.seen = False

    def pytest_collectreport(self, report):
        if report.failed and str(report.longrepr).startswith("flipgate: "):
            self.seen = True

    def pytest_runtest_logreport(self, report):
        if report.failed and outcome_of(report) in USAGE_ERRORS:
            self.seen = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        if self.seen:
            session.exitstatus = USAGE_ERROR


def pytest_load_initial_conftests(early_config, parser, args):
    """Before the project's conftests: an option's value given apart must not have moved the
    rootdir (flipgate/rootdir.py)."""
    from flipgate import rootdir

    rootdir.check(early_config, parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "flipgate_cell: a flipgate conformance cell (facet/control × model × dataset)"
    )
    session = FlipgateSession.start(config)
    try:
        registry.suites()  # flipgate's and the installed packages' (entry points), checked
    except FlipgateError as exc:
        raise pytest.UsageError(f"flipgate: {exc}") from None
    if config.getoption("verbose") <= 0:  # model-loading bars (GGUF, weights) only with -v;
        os.environ.setdefault("TQDM_DISABLE", "1")  # workers inherit it when they start
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if session.is_worker:
        if config.workerinput.get("flipgate_dist") == "loadgroup":
            config.option.loadgroup = True  # workers parse argv only; tag items with their group
        if config.workerinput.get("flipgate_alluredir") and hasattr(
            config.option, "allure_report_dir"
        ):  # before allure-pytest's pytest_configure opens it
            config.option.allure_report_dir = config.workerinput["flipgate_alluredir"]
        _guard_allure_writes(config, session)
        return
    _default_alluredir(config, session)
    _guard_allure_writes(config, session)
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
    for suite in registry.suites():  # e.g. a bad --baseline: one usage-error line, before anything
        try:  # is collected, loaded or written
            suite.configure(session)
        except FlipgateError as exc:
            raise pytest.UsageError(f"flipgate: {exc}") from None


def _guard_allure_writes(config, session: FlipgateSession) -> None:
    """allure-pytest's writes, guarded in every process that makes them: a full disk or a
    read-only folder mid-run is one line at the end, not an INTERNALERROR
    (flipgate.results_dir.WriteGuard)."""
    if not getattr(config.option, "allure_report_dir", None):
        return
    import allure_commons

    from flipgate.results_dir import WriteGuard

    session.allure_guard = WriteGuard()
    allure_commons.plugin_manager.register(session.allure_guard)


def _default_alluredir(config, session) -> None:
    """A bare ``pytest`` (no test path given: ``testpaths`` chose what runs) is the audit: its
    Allure results go to the ``flipgate_alluredir`` ini value (relative to the project), unless
    ``--alluredir`` names a folder. The controller empties it first (allure's own
    ``--clean-alluredir`` would run on every xdist worker, one emptying what another wrote), and
    only of Allure's files in a folder flipgate created (flipgate.results_dir). Runs
    before allure-pytest's own ``pytest_configure`` (this hook is ``tryfirst``); xdist hands the
    option to the workers."""
    from flipgate import results_dir

    if not hasattr(config.option, "allure_report_dir"):
        return
    try:
        if config.option.allure_report_dir:  # the user's folder: created, never emptied
            given = config.option.allure_report_dir
            results_dir.ensure_folder(Path(given), f"--alluredir {given!r}")
            return
        where = config.getini(ALLUREDIR_INI)
        if not where or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
            return
        path = Path(where)
        path = path if path.is_absolute() else session.root / path
        ini = config.inipath.name if config.inipath else "the ini file"
        setting = f"{ini}'s {ALLUREDIR_INI} = {where!r}"
        if config.option.collectonly:
            results_dir.check_folder(path, setting)
        else:  # the previous run's results: only in a folder flipgate made (results_dir)
            results_dir.prepare(path, session.root, setting)
    except FlipgateError as exc:
        raise pytest.UsageError(f"flipgate: {exc}") from None
    config.option.allure_report_dir = str(path)


def _installed_dirs() -> set[Path]:
    """Where this interpreter's installed packages live (a virtual environment's site-packages,
    even one inside the project)."""
    dirs = {Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}
    return dirs | {Path(p) for p in sys.path if Path(p).name in ("site-packages", "dist-packages")}


def installed_nodeid(session, path: Path) -> str | None:
    """The id of an installed package's test file or folder reached through a ``--pyargs``
    argument (init's ``flipgate_suites``): relative to that package, as pytest names it when the
    environment lies outside the project, never ``.venv/lib/python3.11/site-packages/...``.
    None (pytest's own id) for anything else."""
    if not any(path.is_relative_to(d) for d in _installed_dirs()):
        return None
    for start in getattr(session, "_initialpaths", ()):  # the arguments, resolved to paths
        if path.is_relative_to(start) and start.is_dir():
            inside = path.relative_to(start)
            return "" if inside == Path() else inside.as_posix()
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent):
    """An installed suites package's packages get :func:`installed_nodeid` (a plain folder
    keeps pytest's id: an item's id comes from its module's path, not its folder's)."""
    nodeid = installed_nodeid(parent.session, path)
    if nodeid is None or not (path / "__init__.py").is_file():
        return None
    return pytest.Package.from_parent(parent, path=path, nodeid=nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    """An installed suites package's test modules get :func:`installed_nodeid`."""
    nodeid = installed_nodeid(parent.session, module_path)
    if nodeid is None:
        return None
    return pytest.Module.from_parent(parent, path=module_path, nodeid=nodeid)


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


def pytest_generate_tests(metafunc):
    """A test taking :data:`CELL_FIXTURE` runs the cases of the suite its module names
    (:meth:`flipgate.suite.api.Suite.cases`), one xdist group per case's group."""
    if CELL_FIXTURE not in metafunc.fixturenames:
        return
    module = metafunc.module
    name = getattr(module, "SUITE", None)
    try:
        suite = registry.get(name) if isinstance(name, str) else None
        if suite is None:
            raise FlipgateError(f"SUITE = {name!r}: name the suite this module runs")
        _audit_config(metafunc.config)
        cases = suite.cases(FlipgateSession.of(metafunc.config), getattr(module, "PART", None))
    except FlipgateError as exc:
        raise pytest.Collector.CollectError(f"flipgate: {module.__file__}: {exc}") from None
    if isinstance(cases, NoCases):
        params = _skipped(cases.id, cases.reason)
    else:
        params = [
            pytest.param(
                _Param(suite.name, case),
                id=case.id,
                marks=[pytest.mark.xdist_group(case.group), pytest.mark.flipgate_cell],
            )
            for case in cases
        ]
    metafunc.parametrize(CELL_FIXTURE, params, indirect=True)


def _param(item) -> _Param | None:
    """The suite case an item runs (None for any other test and for a suite's skipped
    placeholder)."""
    param = getattr(getattr(item, "callspec", None), "params", {}).get(CELL_FIXTURE)
    return param if isinstance(param, _Param) else None


def _schedule_rank(item) -> int:
    """The case's rank (:attr:`flipgate.suite.api.Case.rank`): the largest work first, so the
    last group to finish is a small one."""
    param = _param(item)
    return param.case.rank if param is not None else 2


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, if it is active
def pytest_collection_modifyitems(config, items):
    """Every process sorts the collection the same way (:func:`_schedule_rank`, stable), and
    xdist hands groups out in that order (``loadscopereorder`` off). Each cell carries the
    models it gates (:data:`flipgate.gate.ledger.MODELS_PROPERTY`) to the controller's ledger."""
    items.sort(key=_schedule_rank)
    for item in items:
        param = _param(item)
        if param is not None and param.case.models:
            item.user_properties.append((MODELS_PROPERTY, list(param.case.models)))


@pytest.fixture(scope="session")
def flipgate_auditor(request):
    """This process's :class:`~flipgate.calls.Auditor` (models load once per worker); its API call
    counts are stored at teardown."""
    try:
        auditor = FlipgateSession.of(request.config).auditor()
    except FlipgateError as exc:  # e.g. a trials store or response cache it cannot open
        from flipgate.suite.cell_loop import fail_input

        fail_input(exc)
    yield auditor
    record_calls(auditor, os.environ.get("PYTEST_XDIST_WORKER", "main"))


def pytest_sessionstart(session):
    """Every process: SIGINT and SIGTERM stop the run (flipgate.interrupts). Controller only: with
    ``--budget``, the cost guard (:func:`_guard`); then the live progress display."""
    state = FlipgateSession.of(session.config)
    state.catch_interrupts(session)
    if state.is_worker:
        return
    if not session.config.option.collectonly and (
        state.reaches_suites() or session.config.getoption("--reset-cache")
    ):  # a project's own tests, run where flipgate is installed, get none of its folders
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
    from flipgate.progress import Plan, without_images

    state = FlipgateSession.of(config)
    plan: Plan = {}
    for item in items:
        param = _param(item)
        if param is None or item.get_closest_marker("skip"):
            continue
        plan |= registry.get(param.suite).planned(state, param.case.param)
    return without_images(plan, state.text_only_models())


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

    out = _projection_path(state)
    try:
        suites = state.suites_to_price()
        auditor = state.auditor()
        try:
            table = guard(auditor, state, suites, budget, out)
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


def _projection_path(state) -> Path:
    """The cost guard's projection of this run (written by the controller, read by every
    process)."""
    return state.store_path.parent / "cost_projection.json"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Every process: a phase that ended in one of flipgate's typed outcomes (flipgate.outcomes)
    carries it on its report, to the controller's gate ledger and usage-error status. A
    FlipgateError in any phase (a fixture's setup or teardown too: a disk that filled up) is its
    one line, typed bad input, never a page of traceback."""
    report = yield
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, FlipgateError) and report.failed:
        report.longrepr = f"flipgate: {one_line(exc)}"
        exc = BadInput(report.longrepr, pytrace=False)
    stamp(report, exc)
    return report


@pytest.fixture
def flipgate_cell(request, flipgate_auditor):
    """The cell of the suite case (:meth:`flipgate.suite.api.Suite.cell`); call ``.run()`` to
    measure, record, report and gate it. Under ``--budget`` a cell of a suite the cost guard did
    not price fails before any call (:func:`flipgate.cost.require_priced`)."""
    param: _Param = request.param
    if request.config.getoption("--budget") is not None:
        from flipgate.cost import require_priced
        from flipgate.suite.cell_loop import fail_input

        try:
            require_priced(_projection_path(FlipgateSession.of(request.config)), param.suite)
        except FlipgateError as exc:
            fail_input(exc)
    return registry.get(param.suite).cell(
        FlipgateSession.of(request.config),
        param.case.param,
        flipgate_auditor,
        request.config.pluginmanager.getplugin("capturemanager"),
    )


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    """Controller only: the run's exit status (``INTERRUPTED`` after SIGINT or SIGTERM), recorded
    in the trials store with GRID cards from it, added to Allure
    (:meth:`FlipgateSession.finish`). After every other plugin's word on the status (the gate
    ledger's, bad input's) and xdist's teardown of its workers, before the terminal summary."""
    result = yield
    state = FlipgateSession.of(session.config)
    state.stop_progress()
    if state.is_worker:
        return result
    status = state.end_status(session.exitstatus)
    if state.store_path.exists():
        status = state.finish(status)
    session.exitstatus = status
    return result


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = FlipgateSession.of(config)
    for line in state.cost_lines + state.summary_lines:
        terminalreporter.write_line(line)


def pytest_unconfigure(config):
    state = config.stash.get(SESSION_KEY, None)
    if state is not None:  # an interrupted session: the display stops with it
        state.stop_progress()
        state.release_interrupts()
        if state.allure_guard is not None:
            import allure_commons

            allure_commons.plugin_manager.unregister(state.allure_guard)
