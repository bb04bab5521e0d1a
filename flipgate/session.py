"""The state of one flipgate pytest session, controller or xdist worker (like pytest-benchmark's
``BenchmarkSession``): the run id, options resolved to paths, models.yaml and the thresholds
files checked once against every suite's gated cells, the suites' memos (a parsed input file, the
regression pairings), the cost guard, and the session's end (GRID cards, Allure, the terminal
lines). The plugin's hooks find it in
``config.stash``."""

from __future__ import annotations

import datetime as dt
import functools
import os
import secrets
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from flipgate import FlipgateError

if TYPE_CHECKING:
    from flipgate.calls import Auditor
    from flipgate.cards.write import WrittenCard
    from flipgate.config import AuditConfig
    from flipgate.interrupts import Interrupts
    from flipgate.progress import LiveProgress, Plan
    from flipgate.results_dir import WriteGuard
    from flipgate.store import TrialStore
    from flipgate.suite.api import Suite

SESSION_KEY = pytest.StashKey["FlipgateSession"]()


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def module_path(name: str) -> Path | None:
    """The folder of an importable package (or the file of a module) named ``name``, found
    without importing it; None when there is none."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    return Path(spec.origin).resolve() if spec.origin else None


class _UncheckedPlan:
    """The session as the suites see it while models.yaml is checked against the thresholds
    files: its :meth:`audit_config` is models.yaml as parsed (what :meth:`Suite.gated
    <flipgate.suite.api.Suite.gated>` reads to list the plan's cells), everything else the
    session's own (whose methods read the parsed config too). So the check never asks the
    session for the config it is checking."""

    def __init__(self, session: FlipgateSession, parsed: AuditConfig):
        self._session, self._parsed = session, parsed

    def audit_config(self) -> AuditConfig:
        return self._parsed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@dataclass
class FlipgateSession:
    """What this process knows about the run; everything is read or checked once, on first use."""

    config: pytest.Config
    run_id: str
    notes: list[str] = field(default_factory=list)  # threshold-check notes for the summary
    cost_lines: list[str] = field(default_factory=list)  # the cost guard's projection table
    summary_lines: list[str] = field(default_factory=list)  # printed at the end of the session
    _parsed: AuditConfig | None = None  # models.yaml, parsed
    _audit: AuditConfig | None = None  # the same, once checked against the thresholds and plan
    _progress: LiveProgress | None = None
    _memo: dict[str, Any] = field(default_factory=dict)
    _interrupts: Interrupts | None = None
    #: allure-pytest's writes, a disk error kept rather than raised (flipgate.results_dir)
    allure_guard: WriteGuard | None = None

    @classmethod
    def start(cls, config: pytest.Config) -> FlipgateSession:
        """The session of this process: a worker takes the controller's run id."""
        worker = getattr(config, "workerinput", None)
        run_id = worker["flipgate_run_id"] if worker is not None else new_run_id()
        session = cls(config, run_id)
        config.stash[SESSION_KEY] = session
        return session

    @classmethod
    def of(cls, config: pytest.Config) -> FlipgateSession:
        return config.stash[SESSION_KEY]

    # -- options -----------------------------------------------------------------------------
    @property
    def is_worker(self) -> bool:
        return getattr(self.config, "workerinput", None) is not None

    @property
    def root(self) -> Path:
        """The project every relative path option resolves against: pytest's rootdir when pytest
        was started inside it, else the directory it was started in (e.g. a test path in another
        checkout, or ``--pyargs flipgate_suites`` with no ini file: the rootdir would then be
        that checkout or the installed package's folder)."""
        rootdir, here = Path(str(self.config.rootpath)), self.invocation_dir.resolve()
        return rootdir if here == rootdir or rootdir in here.parents else here

    def path(self, option: str) -> Path:
        """A path option, relative to the project (:attr:`root`) unless absolute."""
        path = Path(self.config.getoption(option))
        return path if path.is_absolute() else self.root / path

    @property
    def thresholds_dir(self) -> str:
        return str(self.path("--thresholds"))

    @property
    def store_path(self) -> Path:
        return self.path("--runs-dir") / self.run_id / "trials.sqlite"

    @property
    def cache_path(self) -> Path | None:
        """The response cache (None with ``--no-cache``)."""
        if self.config.getoption("--no-cache"):
            return None
        return self.path("--cache-dir") / "responses.sqlite"

    def check_storage(self) -> list[str]:
        """Controller, before anything is collected or called, in a run that reaches a suite's
        module (:meth:`reaches_suites`) or resets the cache: the runs, manifests and GRID
        cards directories can be written, and the response cache is a sound database
        (``--reset-cache`` first moves it aside); a problem is one FlipgateError line naming the
        path and the remedy. Returns lines for the terminal."""
        from flipgate import storage
        from flipgate.cache import ResponseCache

        storage.ensure_dir(storage.RUNS, self.path("--runs-dir"))
        storage.ensure_dir(storage.MANIFEST, self.path("--manifests-dir"))
        storage.ensure_dir(storage.CARDS, self.path("--grid-cards-dir"))
        cache = self.cache_path
        if cache is None:
            return []
        storage.ensure_dir(storage.CACHE, cache.parent)
        lines = []
        if self.config.getoption("--reset-cache") and cache.exists():
            try:
                ResponseCache(cache, check=True).conn.close()
                why = "reset"
            except FlipgateError:
                why = "corrupt"
            moved = storage.move_aside(cache, why)
            lines.append(f"flipgate: --reset-cache: {cache} moved aside to {moved}")
        ResponseCache(cache, check=True).conn.close()
        return lines

    def precision_lines(self) -> list[str]:
        """Controller, at the start: the dtype ``auto`` chose for the local models that left it
        to the hardware (docs/engine.md, "Precision"), one line, which the progress display
        prints before its first line once the run has a plan; none without such a model or with
        bad input (which the cells report)."""
        from flipgate.backends.precision import bf16_support, resolve_dtype

        try:
            models = self.audit_config().models
        except FlipgateError:
            return []
        auto = [
            m
            for m, cfg in models.items()
            if cfg.get("backend") == "hf" and cfg.get("dtype", "auto") == "auto"
        ]
        if not auto:
            return []
        dtype, evidence = resolve_dtype("auto").dtype, bf16_support().evidence
        return [f"flipgate: dtype auto is {dtype} on this {evidence}: {', '.join(auto)}"]

    @property
    def invocation_dir(self) -> Path:
        return Path(self.config.invocation_params.dir)

    @property
    def items_override(self) -> int | None:
        """``--items-per-dataset``: one N for every dataset, over models.yaml's."""
        n: int | None = self.config.getoption("--items-per-dataset")
        return n

    def option(self, name: str) -> Any:
        return self.config.getoption(name)

    def memo(self, key: str, make: Any) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def text_only_models(self) -> set[str]:
        """Local models whose stored fingerprint (``python -m flipgate prepare``, or an earlier
        run) says they take no images, known before any model is loaded (once per process)."""
        return set(self.memo("text_only_models", self._text_only_models))

    def _text_only_models(self) -> frozenset[str]:
        from flipgate.backends.hf import stored_fingerprint

        cache_dir = self.path("--cache-dir")
        found = set()
        for model_id, model in self._models().models.items():
            if model.get("backend") != "hf":
                continue
            try:
                fingerprint = stored_fingerprint(model, cache_dir)
            except FlipgateError:  # a missing package is reported by the cells themselves
                continue
            if fingerprint is not None and not fingerprint.get("vision", True):
                found.add(model_id)
        return frozenset(found)

    def plan(self, suite: str) -> Any:
        """An external suite's parsed ``audit.<config_key>`` (None: not declared)."""
        return self._models().plans.get(suite)

    # -- inputs, checked once ----------------------------------------------------------------
    def _models(self) -> AuditConfig:
        """models.yaml as parsed (once), before :meth:`audit_config` checks it against the
        thresholds files and the plan."""
        if self._parsed is None:
            from flipgate.config import MAX_ITEMS_PER_DATASET, load_models

            n = self.items_override
            if n is not None and not 1 <= n <= MAX_ITEMS_PER_DATASET:
                raise FlipgateError(
                    f"option --items-per-dataset: must be a number of items from 1 to "
                    f"{MAX_ITEMS_PER_DATASET} (value: {n!r}); leave it out to use "
                    f"audit.items_per_dataset and per-dataset n"
                )
            self._parsed = load_models(self.path("--models"))
        return self._parsed

    def audit_config(self) -> AuditConfig:
        """models.yaml, checked with the thresholds files and options against the plan (once)."""
        if self._audit is None:
            from contextlib import nullcontext

            from flipgate import registry
            from flipgate.config import load_thresholds
            from flipgate.suite.threshold_coverage import (
                check_selection,
                check_thresholds,
                gated_cells,
                undecidable_thresholds,
            )

            cfg = self._models()
            n = self.items_override
            thresholds = self.path("--thresholds")
            for model_id in cfg.models:  # fail at collection on a malformed thresholds file
                load_thresholds(thresholds, model_id)
            cells = gated_cells(registry.suites(), _UncheckedPlan(self, cfg))
            check_selection(cfg, cells)
            self.notes = check_thresholds(thresholds, cfg, cells, registry.suites())
            if not self.is_worker:  # thresholds their cap cannot decide, shown before any call
                running = {s.name for s in self.collected_suites()}
                mine = [(suite, c) for suite, c in cells if suite in running]
                fixed_n = self.config.getoption("--fixed-n")
                futile = undecidable_thresholds(thresholds, cfg, mine, n, fixed_n)
                self.notes += futile  # and again in the closing summary
                reporter = self.config.pluginmanager.get_plugin("terminalreporter")
                capture = self.config.pluginmanager.get_plugin("capturemanager")
                if reporter is not None and futile:  # collection's output capture set aside
                    with capture.global_and_fixture_disabled() if capture else nullcontext():
                        for line in futile:
                            reporter.write_line(f"flipgate: {line}")
            self._audit = cfg
        return self._audit

    # -- running -----------------------------------------------------------------------------
    def auditor(self) -> Auditor:
        """A new :class:`~flipgate.calls.Auditor` for this process (models load once in it)."""
        from flipgate import registry
        from flipgate.calls import Auditor, Paths

        cfg = self.audit_config()
        workers = int((getattr(self.config, "workerinput", None) or {}).get("workercount", 1))
        if workers > 1:  # every worker may be busy (an xdist group is a model × facet × dataset,
            import torch  # so even one model has several): share the cores, never oversubscribe

            torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
        paths = Paths(
            store=self.store_path,
            cache=self.cache_path,
            manifests=self.path("--manifests-dir"),
            models=self.path("--cache-dir"),
        )
        auditor = Auditor(
            cfg,
            self.run_id,
            paths,
            self.items_override,
            # per-call bars in a single process with -v; otherwise the controller's live display
            progress=not self.is_worker and self.config.getoption("verbose") > 0,
            control_salt=self.run_id if self.config.getoption("--fresh-controls") else None,
            allow_ungated=self.config.getoption("--allow-ungated"),
            thresholds_dir=self.thresholds_dir,
            fixed_n=self.config.getoption("--fixed-n"),
        )
        # a suite whose cases read a facet's items holds that facet while they are open
        # (docs/definitions.md §12.4): e.g. the regression cases
        for suite in registry.suites():
            dependents = getattr(suite, "dependents", None)
            if dependents is not None:
                auditor.dependent_sources.append(functools.partial(dependents, self, auditor))
        return auditor

    def may_collect(self, suite: Path) -> bool:
        """Whether this session may collect the suite directory ``suite``: some argument is it,
        inside it or above it, and it is not ignored. True when it does not exist here (no way to
        tell; the guard then projects it)."""
        if not suite.exists():
            return True
        suite = suite.resolve()
        if self.config.hook.pytest_ignore_collect(collection_path=suite, config=self.config):
            return False
        for arg in self.config.args:
            path = self._argument_path(str(arg).split("::")[0])
            if path == suite or suite in path.parents or path in suite.parents:
                return True
        return False

    def _argument_path(self, arg: str) -> Path:
        """A command-line (or ``testpaths``) argument as a path; with ``--pyargs``, a module or
        package name is its file or folder (``flipgate_suites`` is the installed suites)."""
        path = (self.invocation_dir / arg).resolve()
        if not path.exists() and self.config.option.pyargs:
            return module_path(arg) or path
        return path

    def test_dir(self, folder: str) -> Path:
        """A suite's test folder (:attr:`flipgate.suite.api.Suite.test_dirs`): under the project,
        or, when it starts with an importable package's name (``flipgate_suites/order``), under
        that installed package."""
        path = self.root / folder
        head, _, rest = folder.partition("/")
        if not path.exists() and (package := module_path(head)) is not None:
            return package / rest
        return path

    def collected_suites(self) -> list[Suite]:
        """The registered suites this session may run (:meth:`may_collect` one of their test
        folders): what the cost guard prices."""
        from flipgate import registry

        return [
            s
            for s in registry.suites()
            if any(self.may_collect(self.test_dir(d)) for d in s.test_dirs)
        ]

    def named_suites(self) -> set[str]:
        """The suites the test modules the run's arguments (or ``testpaths``) reach name
        (:func:`flipgate.cost.declared_suites`, a walk over those folders: once per process)."""
        from flipgate.cost import declared_suites

        return set(self.memo("named_suites", lambda: declared_suites(self)))

    def reaches_suites(self) -> bool:
        """Whether the run reaches a test module that names a suite (:meth:`named_suites`):
        only such a run prepares flipgate's folders and response cache before it starts
        (:meth:`check_storage`)."""
        return bool(self.named_suites())

    def suites_to_price(self) -> list[Suite]:
        """The registered suites the cost guard prices: those whose test folders this session
        may collect (:meth:`collected_suites`) and those any test module the run reaches names
        (:meth:`named_suites`), so a suite is priced whatever path it is collected from (a
        checkout whose ``flipgate_suites`` is installed from another copy)."""
        from flipgate import registry

        declared, by_folder = self.named_suites(), self.collected_suites()
        return [s for s in registry.suites() if s.name in declared or s in by_folder]

    # -- interruption (flipgate/interrupts.py) ---------------------------------------------
    def catch_interrupts(self, session: pytest.Session) -> None:
        """From here to :meth:`release_interrupts`, SIGINT and SIGTERM stop the run: the running
        test is interrupted, and the session (and an xdist controller's loop) stops at the next
        test boundary (:class:`flipgate.interrupts.Interrupts`)."""
        from flipgate.interrupts import Interrupts

        def stop(reason: str) -> None:
            session.shouldstop = reason
            dsession = self.config.pluginmanager.getplugin("dsession")  # xdist's controller
            if dsession is not None:
                dsession.shouldstop = reason

        self._interrupts = Interrupts(stop, speak=not self.is_worker)
        self._interrupts.install()

    def release_interrupts(self) -> None:
        if self._interrupts is not None:
            self._interrupts.uninstall()

    @property
    def interrupted_by(self) -> str | None:
        """The signal that interrupted this process's run (``SIGINT``, ``SIGTERM``), or None."""
        return self._interrupts.received if self._interrupts is not None else None

    def end_status(self, exitstatus: int) -> int:
        """The run's exit status: ``INTERRUPTED`` where a signal stopped it, whatever its cells
        said (the ``KeyboardInterrupt`` may have landed where Python could not raise it)."""
        from flipgate.exitcodes import INTERRUPTED

        return INTERRUPTED if self.interrupted_by is not None else int(exitstatus)

    # -- the end -----------------------------------------------------------------------------
    def finish(self, exitstatus: int) -> int:
        """Controller: the run's end recorded in its trials store (:meth:`TrialStore.record_end`:
        a baseline is promoted only from a finished, uninterrupted run), GRID cards from the store
        (an interrupted run's: of what it recorded, marked partial; a (model, dataset) with only
        a suite's unfinished cells has none, said in one line), Allure results, the summary lines.
        Returns the run's exit status: ``exitstatus``, or ``INTERNAL_ERROR`` when the cards could
        not be written (the trials store is kept)."""
        from flipgate import __version__, registry
        from flipgate.cards.build import git_commit
        from flipgate.cards.write import write_cards
        from flipgate.exitcodes import (
            GATE_FAILED,
            GATE_PASSED,
            INTERNAL_ERROR,
            INTERRUPTED,
            USAGE_ERROR,
        )
        from flipgate.grammar import GRAMMAR_VERSION
        from flipgate.store import TrialStore

        cfg = self.audit_config()
        finished = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        interrupted = None
        if exitstatus == INTERRUPTED:  # a signal, or pytest's own stop (a worker that crashed)
            interrupted = self.interrupted_by or "stopped before its end"
        store = None
        try:
            store = TrialStore(self.store_path)
            store.set_meta(
                {  # the run's identity, which a later comparison checks (RunRecord.check_grammar)
                    "run_id": self.run_id,
                    "created": finished,
                    "git_commit": git_commit(self.root),
                    "flipgate_version": __version__,
                    "grammar_version": GRAMMAR_VERSION,
                    "seed": cfg.seed,
                    "k": cfg.k,
                    "items_per_dataset": self.items_override or cfg.items_per_dataset,
                    "sequential": (
                        None
                        if cfg.sequential is None or self.config.getoption("--fixed-n")
                        else asdict(cfg.sequential)
                    ),
                }
            )
            store.record_end(finished, exitstatus, interrupted)
            written = write_cards(
                store,
                self.path("--grid-cards-dir"),
                self.run_id,
                cfg.bootstrap_n,
                cfg.level,
                cfg.seed,
                self.root,
                registry.suites(),
            )
            if written.missing and exitstatus == GATE_PASSED:  # nothing explains them
                raise FlipgateError(written.missing[0])
        except Exception as exc:  # report, never lose the trials store
            self.summary_lines = [
                "flipgate: writing GRID cards failed: "
                + (str(exc) if isinstance(exc, FlipgateError) else f"{type(exc).__name__}: {exc}"),
                kept_line(self.store_path, store),
            ]
            if store is not None:
                try:
                    store.record_end(finished, INTERNAL_ERROR, interrupted)
                except Exception:  # the line above already says what failed
                    pass
            return INTERNAL_ERROR
        self.summary_lines = self._summary(store, cfg)
        if interrupted is not None:
            self.summary_lines.append(
                f"flipgate: run interrupted ({interrupted}): exit status {INTERRUPTED}; "
                + (
                    f"{len(written.cards)} GRID card(s) of what it recorded, marked partial"
                    if written.cards
                    else "no GRID card written: it recorded nothing to build one from"
                )
                + "; the trials store records it, and flipgate baseline will not promote it"
            )
        self.summary_lines += [f"flipgate: no GRID card for {line}" for line in written.missing]
        self.summary_lines += [f"flipgate: GRID card {c.json_path}" for c in written.cards]
        allure = self.config.pluginmanager.hasplugin("allure_pytest")
        alluredir = self.config.getoption("--alluredir", None) if allure else None
        if alluredir:
            from flipgate.results_dir import WriteGuard

            guard = self.allure_guard = self.allure_guard or WriteGuard()
            try:
                self._allure(Path(alluredir), store, cfg, written.cards)
            except OSError as exc:  # said below, with the writes the guard kept from raising
                guard.error = guard.error or exc
            problem = guard.line(Path(alluredir), f"--alluredir {alluredir!r}")
            if problem is None:
                self.summary_lines.append(f"flipgate: Allure results in {alluredir}")
            else:  # the report is incomplete: the run did not do what it was asked
                self.summary_lines.append(
                    f"flipgate: {problem}; the Allure results are incomplete, the trials store "
                    "and the GRID cards are kept"
                )
                if exitstatus in (GATE_PASSED, GATE_FAILED):
                    exitstatus = USAGE_ERROR
                    store.record_end(finished, exitstatus, interrupted)
        return exitstatus

    # -- live progress (flipgate/progress.py) -------------------------------------------------
    def write_plan(self, plan: Plan) -> None:
        """The trials this process's collection plans, into the run's store (workers all write the
        same plan; the controller's display reads it)."""
        from flipgate.store import TrialStore

        if plan:
            TrialStore(self.store_path).add_planned(plan)

    def start_progress(self) -> None:
        """Controller: the live progress display (``--progress``), on a copy of the terminal's
        stderr that pytest's output capture does not redirect."""
        from flipgate.progress import LiveProgress, display_mode

        fd = os.dup(2)
        mode = display_mode(self.config.getoption("--progress"), fd)
        if mode == "off":
            os.close(fd)
            return
        stream = os.fdopen(fd, "w", buffering=1)
        terminal = self.config.get_terminal_writer()
        self._progress = LiveProgress(
            self.store_path,
            stream,
            mode,
            mid_line=lambda: terminal.width_of_current_line > 0,
            preamble=self.precision_lines(),
        )
        self._progress.start()

    def stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress.stream.close()
            self._progress = None

    def _summary(self, store: TrialStore, cfg: AuditConfig) -> list[str]:
        from flipgate import registry
        from flipgate.gate.rules import decided_line

        lines = [f"flipgate: run {self.run_id}, trials in {self.store_path}"]
        lines += [f"flipgate: {note}" for note in self.notes]
        lines += self._call_lines(store)
        lines += self._sequential_lines(store)
        lines += [
            f"flipgate: {m}: {c['requests']} API calls, {c['retries']} retries, "
            f"{c['timeouts']} timeouts, {c['failures']} failed"
            for m, c in store.calls().items()
        ]
        verdicts = [v for _, _, v in store.all_verdicts()]  # q-values set by write_cards
        decided = decided_line(verdicts)
        lines += [f"flipgate: {decided}"] if decided else []
        failed = [v.q_value for v in verdicts if v.verdict == "fail" and v.q_value is not None]
        if failed:
            alpha = 1 - cfg.level
            tested = sum(v.q_value is not None for v in verdicts)
            lines.append(
                f"flipgate: Benjamini–Hochberg over {tested} gated thresholds: "
                f"{sum(q <= alpha for q in failed)} of {len(failed)} failed ones stay "
                f"significant at FDR {alpha:.2f}"
            )
        for suite in registry.suites():
            lines += suite.summary_lines(store)
        return lines

    def _call_lines(self, store: TrialStore) -> list[str]:
        """Prompts each model answered this run (none on a warm rerun) and how many trials the
        response cache answered instead."""
        calls = store.model_calls()
        if not calls:
            return []
        cached = sum(c for _, c in store.answered().values())
        copies = store.answer_copies()

        def count(model_id: str, n: int) -> str:
            copied = copies.get(model_id, 0)
            return f"{model_id} {n}" + (f" ({copied} copies, not computed)" if copied else "")

        lines = [
            "flipgate: model calls this run: "
            + ", ".join(count(m, n) for m, n in calls.items())
            + f" ({cached} trials from the response cache)"
        ]
        if copies:
            lines.append(
                f"flipgate: {sum(copies.values())} of the {sum(calls.values())} calls were "
                "answered as copies of an equal greedy input (a same-ordering control's "
                "replicates: its facet's canonical ordering), not computed"
            )
        if self.config.getoption("--fresh-controls"):
            lines.append(
                f"flipgate: --fresh-controls: same-ordering replicates drawn with new seeds "
                f"(salt {self.run_id}), so the noise floor was measured again"
            )
        return lines

    def _sequential_lines(self, store: TrialStore) -> list[str]:
        """The run's sequential gates (docs/definitions.md §12): cells stopped before their cap
        and model calls saved; none at fixed N."""
        from flipgate.cards.disclosure import run_line
        from flipgate.gate.sequential import SequentialStop

        line = run_line(store.records(SequentialStop))
        return [line] if line else []

    def _allure(
        self, results: Path, store: TrialStore, cfg: AuditConfig, cards: list[WrittenCard]
    ) -> None:
        from flipgate.cards.build import library_versions
        from flipgate.report import add_card_results, write_environment

        add_card_results(results, cards)
        props: dict[str, Any] = {
            "run_id": self.run_id,
            "models": ", ".join(cfg.models),
            "K": cfg.k,
            "seed": cfg.seed,
        }
        props.update({f"N.{d}": cfg.n_items(d, self.items_override) for d in cfg.datasets()})
        props.update({f"lib.{k}": v for k, v in library_versions().items()})
        for model_id, info in store.models().items():
            props[f"model.{model_id}.weights_sha256"] = info["fingerprint"].get("weights_sha256")
        write_environment(results, props)


def kept_line(path: Path, store: TrialStore | None) -> str:
    """Where a run's trials are kept (``path``, its store), or that it recorded none."""
    try:
        n = store.conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] if store else None
    except Exception:  # an unreadable store: say where it is
        n = None
    if n == 0:
        return f"flipgate: no trials recorded (its store: {path})"
    return f"flipgate: trials are kept in {path}"


def record_calls(auditor: Auditor, source: str) -> None:
    """Store this process's prompts per model (every model it set up, 0 when the cache answered
    all) and its API call counts (requests, retries, timeouts, failures); envelope variants
    (``<model>@...``) count for their model."""
    totals: dict[str, dict[str, int]] = {}
    copies: Counter[str] = Counter()
    for name, backend in auditor.backends().items():
        model_id = auditor.base_model(name)
        auditor.store.add_model_calls(model_id, source, auditor.model_calls[model_id])
        copies[model_id] += int(getattr(backend, "answer_copies", 0))
        stats = backend.call_stats
        if stats:
            total = totals.setdefault(model_id, dict.fromkeys(stats, 0))
            for key, value in stats.items():
                total[key] += value
    for model_id, counts in totals.items():
        auditor.store.add_calls(model_id, source, counts)
    for model_id, n in copies.items():
        auditor.store.add_answer_copies(model_id, source, n)
