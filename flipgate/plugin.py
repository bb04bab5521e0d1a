"""The flipgate pytest plugin: options, suite parametrisation, per-worker auditor, session-end
cards.

Suite tests declare ``FACET = "<facet or control>"`` at module level and take the ``flip_cell``
fixture; the plugin parametrises them over every (model, dataset) in models.yaml, one xdist group
per model, so each worker loads a model once.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from pathlib import Path

import pytest

from flipgate import FlipgateError
from flipgate.exitcodes import USAGE_ERROR

CELL_FIXTURE = "flip_cell"
ENVELOPE_FIXTURE = "envelope_cell"
ODI_FIXTURE = "odi_cell"
REGRESSION_FIXTURE = "regression_cell"


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
        "--cache-dir", default=".flipgate_cache", help="response cache and dequantised models"
    )
    g.addoption("--no-cache", action="store_true", help="do not read or write the response cache")
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


def _root(config) -> Path:
    return Path(str(config.rootpath))


def _resolve(config, option: str) -> Path:
    path = Path(config.getoption(option))
    return path if path.is_absolute() else _root(config) / path


class _XdistHooks:
    """Hands the controller's run id to every worker."""

    def __init__(self, config):
        self.config = config

    def pytest_configure_node(self, node):
        node.workerinput["flipgate_run_id"] = self.config._flipgate_run_id
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
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        config._flipgate_run_id = worker["flipgate_run_id"]
        if worker.get("flipgate_dist") == "loadgroup":
            config.option.loadgroup = True  # workers parse argv only; tag items with their group
    else:
        config.pluginmanager.register(_BadInputStatus(), "flipgate-bad-input")
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        config._flipgate_run_id = f"{stamp}-{secrets.token_hex(3)}"
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_XdistHooks(config), "flipgate-xdist")
            if getattr(config.option, "numprocesses", None) and getattr(
                config.option, "dist", "no"
            ) in ("no", "load"):
                config.option.dist = (
                    "loadgroup"  # one group per model: each worker loads a model once
                )
    config._flipgate_config = None
    if worker is None and (
        config.getoption("--baseline") is not None or config.getoption("--candidate") is not None
    ):
        _check_baseline(config)


def _check_baseline(config) -> None:
    """A bad ``--baseline`` / ``--candidate`` is one usage-error line (exit status 4) before
    anything is collected, loaded or written."""
    from flipgate.config import load_models

    try:
        config._flipgate_pairings = _pairings(config, load_models(_resolve(config, "--models")))
    except FlipgateError as exc:
        raise pytest.UsageError(f"flipgate: {exc}") from None


def _audit_config(config):
    """models.yaml, checked with the thresholds files and options against the plan (once)."""
    if config._flipgate_config is None:
        from flipgate.config import load_models, load_thresholds
        from flipgate.threshold_check import check_thresholds, plan_cells

        n = config.getoption("--items-per-dataset")
        if n is not None and n < 1:
            raise FlipgateError(
                f"option --items-per-dataset: must be a positive number of items (value: {n!r}); "
                f"leave it out to use audit.items_per_dataset and per-dataset n"
            )
        cfg = load_models(_resolve(config, "--models"))
        thresholds = _resolve(config, "--thresholds")
        for model_id in cfg.models:  # fail at collection on a malformed thresholds file
            load_thresholds(thresholds, model_id)
        roster, benchmarks = _envelope_plan(config, cfg)
        if (
            getattr(config, "_flipgate_pairings", None) is None
        ):  # the controller checked them at configure
            config._flipgate_pairings = _pairings(config, cfg)
        compared = sorted({p.candidate for p in config._flipgate_pairings if not p.skip})
        config._flipgate_notes = check_thresholds(
            thresholds, cfg, plan_cells(cfg, roster, benchmarks, compared)
        )
        config._flipgate_config = cfg
    return config._flipgate_config


def _pairings(config, cfg):
    """Candidate/baseline pairs of the regression suite (docs/definitions.md §11): models.yaml
    ``baseline:`` entries, and with ``--baseline PATH`` every order-suite model (or ``--candidate``)
    against that run."""
    from flipgate.regression.plan import pairings
    from flipgate.regression.runs import RunRecord

    path, candidate = config.getoption("--baseline"), config.getoption("--candidate")
    if candidate is not None and path is None:
        raise FlipgateError(
            f"option --candidate {candidate!r}: names the model to compare with --baseline PATH, "
            f"which is not given"
        )
    record = None
    if path is not None:
        record = RunRecord.open(
            path if Path(path).is_absolute() else Path(config.invocation_params.dir) / path
        )
        record.check_grammar(cfg.seed)
    return pairings(cfg.models, cfg.audited("order"), record, candidate, str(cfg.path))


def _envelope_plan(config, cfg) -> tuple[list[str], list[str]]:
    """(roster, benchmark names) of the configuration envelope; none when its file cannot be read
    (the envelope suite reports that itself when it is collected)."""
    from flipgate.envelope.spec import load_envelope

    try:
        envelope = load_envelope(_resolve(config, "--envelope"), list(cfg.models))
    except FlipgateError:
        return [], []
    config._flipgate_envelope = envelope  # read once: the envelope suite reuses it
    return envelope.roster or cfg.audited("envelope"), [b.name for b in envelope.benchmarks]


def _envelope(config):
    if getattr(config, "_flipgate_envelope", None) is None:
        from flipgate.envelope.spec import load_envelope

        config._flipgate_envelope = load_envelope(
            _resolve(config, "--envelope"), list(_audit_config(config).models)
        )
    return config._flipgate_envelope


def _parametrise_envelope(metafunc):
    try:
        envelope = _envelope(metafunc.config)
        roster = envelope.roster or _audit_config(metafunc.config).audited("envelope")
    except FlipgateError as exc:
        raise pytest.Collector.CollectError(f"flipgate: {exc}") from None
    params = [
        pytest.param(
            spec,
            id=spec.name,
            marks=[pytest.mark.xdist_group("envelope"), pytest.mark.flipgate_cell],
        )
        for spec in envelope.benchmarks
    ]
    if not roster:
        params = [
            pytest.param(
                None,
                id="no-roster",
                marks=pytest.mark.skip(
                    reason=f"no model in {metafunc.config.getoption('--models')} lists suite "
                    "'envelope'"
                ),
            )
        ]
    metafunc.parametrize(ENVELOPE_FIXTURE, params, indirect=True)


def _parametrise_odi(metafunc):
    """One ODI fit over every order-suite model: its own xdist group, since it reads every model."""
    try:
        _audit_config(metafunc.config)
    except FlipgateError as exc:
        raise pytest.Collector.CollectError(f"flipgate: {exc}") from None
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


def _cell_label(cell: str, dataset: str) -> str:
    return f"{cell.replace(':', '-')}-{dataset}"


def _compared_cells(cfg, pairing) -> list[tuple[str, str]]:
    """The candidate's cells; in one run only those its baseline is audited on too."""
    mine = cfg.cells(pairing.candidate)
    return (
        mine if pairing.run is not None else [c for c in mine if c in cfg.cells(pairing.baseline)]
    )


def _parametrise_regression(metafunc):
    """One case per (candidate, baseline, cell), in the candidate's xdist group (its cells ran there
    first)."""
    try:
        cfg = _audit_config(metafunc.config)
    except FlipgateError as exc:
        raise pytest.Collector.CollectError(f"flipgate: {exc}") from None
    params = [
        pytest.param(
            (p, cell, dataset),
            id=f"{p.label}-{_cell_label(cell, dataset)}",
            marks=[pytest.mark.xdist_group(p.candidate), pytest.mark.flipgate_cell],
        )
        for p in metafunc.config._flipgate_pairings
        for cell, dataset in _compared_cells(cfg, p)
    ]
    if not params:
        params = [
            pytest.param(
                None,
                id="no-baseline",
                marks=pytest.mark.skip(
                    reason=f"no baseline: name one with `baseline: <model id>` in {cfg.path} or "
                    "pass --baseline PATH"
                ),
            )
        ]
    metafunc.parametrize(REGRESSION_FIXTURE, params, indirect=True)


def pytest_generate_tests(metafunc):
    if REGRESSION_FIXTURE in metafunc.fixturenames:
        return _parametrise_regression(metafunc)
    if ENVELOPE_FIXTURE in metafunc.fixturenames:
        return _parametrise_envelope(metafunc)
    if ODI_FIXTURE in metafunc.fixturenames:
        return _parametrise_odi(metafunc)
    if CELL_FIXTURE not in metafunc.fixturenames:
        return
    from flipgate.facets import CONTROLS, FACETS, control_cell

    name = getattr(metafunc.module, "FACET", None)
    if name not in FACETS and name not in CONTROLS:
        raise pytest.Collector.CollectError(
            f"flipgate: {metafunc.module.__file__}: FACET = {name!r} is not a known facet or "
            "control "
            f"(known: {', '.join(sorted(list(FACETS) + list(CONTROLS)))})"
        )
    try:
        cfg = _audit_config(metafunc.config)
    except FlipgateError as exc:
        raise pytest.Collector.CollectError(f"flipgate: {exc}") from None
    if name in CONTROLS:
        cells = [
            (control_cell(name, f), f"{f}-{d.name}", d.name) for f, d in cfg.controls.get(name, [])
        ]
    else:
        cells = [(name, d.name, d.name) for d in cfg.facets.get(name, [])]
    params = [
        pytest.param(
            (cell, model_id, dataset),
            id=f"{model_id}-{label}",
            marks=[pytest.mark.xdist_group(model_id), pytest.mark.flipgate_cell],
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
        params = [
            pytest.param(None, id="not-declared", marks=pytest.mark.skip(reason=f"{name}: {why}"))
        ]
    metafunc.parametrize(CELL_FIXTURE, params, indirect=True)


def _auditor(config):
    from flipgate.audit import Auditor, Paths

    cfg = _audit_config(config)
    workers = int((getattr(config, "workerinput", None) or {}).get("workercount", 1))
    if (
        workers > 1
    ):  # busy workers <= models (one xdist group per model): share the cores among them
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // min(workers, len(cfg.models))))
    cache_dir = _resolve(config, "--cache-dir")
    run_id = config._flipgate_run_id
    paths = Paths(
        store=_resolve(config, "--runs-dir") / run_id / "trials.sqlite",
        cache=None if config.getoption("--no-cache") else cache_dir / "responses.sqlite",
        manifests=_resolve(config, "--manifests-dir"),
        models=cache_dir,
    )
    return Auditor(
        cfg,
        run_id,
        paths,
        config.getoption("--items-per-dataset"),
        progress=not getattr(config, "workerinput", None),
    )


@pytest.fixture(scope="session")
def flipgate_auditor(request):
    """This process's :class:`~flipgate.audit.Auditor` (models load once per worker); its API call
    counts are stored at teardown."""
    auditor = _auditor(request.config)
    yield auditor
    _record_calls(auditor, os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.fixture
def envelope_cell(request, flipgate_auditor):
    """One benchmark of the configuration envelope over the roster; call ``.run()``."""
    from flipgate.envelope.cell import EnvelopeCell

    return EnvelopeCell(
        flipgate_auditor,
        str(_resolve(request.config, "--thresholds")),
        _envelope(request.config),
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
        str(_resolve(request.config, "--thresholds")),
        pairing,
        cell,
        dataset,
        request.config.getoption("--baseline-partial"),
        request.config.pluginmanager.getplugin("capturemanager"),
    )


@pytest.fixture
def odi_cell(request, flipgate_auditor):
    """The ODI fit over the order suites' trials of every model; call ``.run()``."""
    from flipgate.odi.cell import ODICell

    return ODICell(
        flipgate_auditor,
        str(_resolve(request.config, "--thresholds")),
        request.config.pluginmanager.getplugin("capturemanager"),
    )


def _may_collect(config, suite: Path) -> bool:
    """Whether this session may collect the suite directory ``suite``: some argument is it, inside
    it or above it, and it is not ignored. True when it does not exist here (no way to tell; the
    guard then projects it)."""
    if not suite.exists():
        return True
    suite = suite.resolve()
    if config.hook.pytest_ignore_collect(collection_path=suite, config=config):
        return False
    base = Path(config.invocation_params.dir)
    for arg in config.args:
        path = (base / str(arg).split("::")[0]).resolve()
        if path == suite or suite in path.parents or path in suite.parents:
            return True
    return False


def _record_calls(auditor, source: str) -> None:
    """Store this process's API call counts (requests, retries, timeouts, failures) per model;
    envelope variants (``<model>@...``) count for their model."""
    totals: dict[str, dict[str, int]] = {}
    for name, backend in list(getattr(auditor, "_backends", {}).items()):
        stats = getattr(backend, "call_stats", None)
        if stats:
            model_id = auditor.config.models.get(name, {}).get("variant_of") or name
            total = totals.setdefault(model_id, dict.fromkeys(stats, 0))
            for key, value in stats.items():
                total[key] += value
    for model_id, counts in totals.items():
        auditor.store.add_calls(model_id, source, counts)


def _guard_plan(config):
    """What this session will call (:class:`flipgate.cost.GuardPlan`), from the suites it may
    collect."""
    from flipgate.cost import GuardPlan
    from flipgate.facets import get_facet, split_cell

    cfg, suites = _audit_config(config), _root(config) / "suites"
    plan = GuardPlan()
    if any(_may_collect(config, suites / d) for d in ("facets", "controls")):
        plan.order = cfg.audited("order")
        judged = any(
            getattr(get_facet(split_cell(name)[1]), "judged", False) for name, _ in cfg.cells()
        )
        plan.judge = [cfg.judge] if cfg.judge and judged else []
    if _may_collect(config, suites / "benchmarks") and _resolve(config, "--envelope").exists():
        plan.envelope = _envelope(config)
        plan.roster = plan.envelope.roster or cfg.audited("envelope")
    return plan


def pytest_sessionstart(session):
    """Controller only, with ``--budget``: the cost guard (flipgate.cost.guard) before any paid
    call. A refusal exits with ``exitcodes.BUDGET_REFUSED``, bad input with
    ``exitcodes.USAGE_ERROR``."""
    config = session.config
    budget = config.getoption("--budget")
    if budget is None or getattr(config, "workerinput", None) is not None:
        return
    from flipgate import exitcodes
    from flipgate.cost import BudgetRefused, guard

    out = _resolve(config, "--runs-dir") / config._flipgate_run_id / "cost_projection.json"
    try:
        plan = _guard_plan(config)
        auditor = _auditor(config)
        try:
            table = guard(auditor, plan, budget, config.getoption("--pilot-items"), out)
        finally:
            _record_calls(auditor, "pilot")
    except BudgetRefused as exc:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        for line in (exc.table or "").splitlines() if reporter is not None else []:
            reporter.write_line(line)
        pytest.exit(f"flipgate: {exc}", returncode=exitcodes.BUDGET_REFUSED)
    except FlipgateError as exc:
        pytest.exit(f"flipgate: {exc}", returncode=exitcodes.USAGE_ERROR)
    config._flipgate_cost = table.splitlines()


@pytest.fixture
def flip_cell(request, flipgate_auditor):
    """A (facet or control, model, dataset) cell; call ``.run()`` to measure and gate it."""
    from flipgate.suite import FlipCell

    name, model_id, dataset = request.param
    return FlipCell(
        flipgate_auditor,
        str(_resolve(request.config, "--thresholds")),
        name,
        model_id,
        dataset,
        request.config.pluginmanager.getplugin("capturemanager"),
    )


def pytest_sessionfinish(session, exitstatus):
    """Controller only: build GRID cards from the run's trials store, add them to Allure."""
    config = session.config
    store_path = _resolve(config, "--runs-dir") / config._flipgate_run_id / "trials.sqlite"
    if getattr(config, "workerinput", None) is not None or not store_path.exists():
        return
    from flipgate.cards.build import library_versions, write_cards
    from flipgate.regression.runs import run_meta
    from flipgate.report import add_card_results, write_environment
    from flipgate.store import TrialStore

    cfg = _audit_config(config)
    store = TrialStore(store_path)
    store.set_meta(
        run_meta(
            config._flipgate_run_id, cfg, config.getoption("--items-per-dataset"), _root(config)
        )
    )
    try:
        written = write_cards(
            store,
            _resolve(config, "--grid-cards-dir"),
            config._flipgate_run_id,
            cfg.bootstrap_n,
            cfg.level,
            cfg.seed,
            _root(config),
        )
    except Exception as exc:  # report, never lose the trials store
        config._flipgate_summary = [
            f"flipgate: writing GRID cards failed: {type(exc).__name__}: {exc}",
            f"flipgate: trials are kept in {store_path}",
        ]
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        return
    lines = [f"flipgate: run {config._flipgate_run_id}, trials in {store_path}"]
    lines += [f"flipgate: {note}" for note in getattr(config, "_flipgate_notes", [])]
    lines += [
        f"flipgate: {m}: {c['requests']} API calls, {c['retries']} retries, {c['timeouts']} "
        "timeouts, "
        f"{c['failures']} failed"
        for m, c in store.calls().items()
    ]
    verdicts = [v for _, _, v in store.all_verdicts()]  # q-values set by write_cards
    failed = [v.q_value for v in verdicts if v.verdict == "fail" and v.q_value is not None]
    if failed:
        alpha = 1 - cfg.level
        tested = sum(v.q_value is not None for v in verdicts)
        lines.append(
            f"flipgate: Benjamini–Hochberg over {tested} gated thresholds: "
            f"{sum(q <= alpha for q in failed)} of {len(failed)} failed ones stay significant "
            f"at FDR {alpha:.2f}"
        )
    odi = store.odi()
    if odi:
        lines.append(
            f"flipgate: ODI ({odi['profile']}, panel {', '.join(odi['roster'])}, diagnostics "
            f"{'passed' if odi['passed'] else 'FAILED'}): σ_π "
            + ", ".join(f"{f} {v['sigma_pi']['median']:.3f}" for f, v in odi["facets"].items())
        )
    lines += [f"flipgate: GRID card {p}" for p in written if p.suffix == ".json"]
    alluredir = (
        config.getoption("--alluredir", None)
        if config.pluginmanager.hasplugin("allure_pytest")
        else None
    )
    if alluredir:
        results = Path(alluredir)
        add_card_results(results, written)
        props = {
            "run_id": config._flipgate_run_id,
            "models": ", ".join(cfg.models),
            "K": cfg.k,
            "seed": cfg.seed,
            "items_per_dataset": config.getoption("--items-per-dataset") or cfg.items_per_dataset,
        }
        props.update({f"lib.{k}": v for k, v in library_versions().items()})
        for model_id, info in store.models().items():
            props[f"model.{model_id}.weights_sha256"] = info["fingerprint"].get("weights_sha256")
        write_environment(results, props)
        lines.append(f"flipgate: Allure results in {results}")
    config._flipgate_summary = lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in getattr(config, "_flipgate_cost", []) + getattr(config, "_flipgate_summary", []):
        terminalreporter.write_line(line)
