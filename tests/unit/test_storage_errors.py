"""What flipgate keeps on disk, when the disk says no (issue #28): a full disk, a path it cannot
write, a runs directory that is a file, a corrupt response cache, an edited or truncated manifest,
a damaged baseline store, and stale lock files. Each is one line naming the path and what to do
(exit status 4, or 3 where only the GRID cards could not be written), never a traceback; a
response cache that cannot be written is warned about once and the run goes on without it.

Tests run as root, so chmod cannot make a directory unwritable: a path under a regular file is
uncreatable for root too, SQLite's own limits (``max_page_count``, a ``mode=ro`` connection) give
real "disk full" and "read-only" errors, and only OS-level write errors are monkeypatched."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import sqlite3
import warnings
from pathlib import Path

import pytest
from support.bad_input import Case, run_in_process
from support.paths import REPO

from flipgate import FlipgateError, storage
from flipgate.analysis_cache import AnalysisCache
from flipgate.backends.base import Output
from flipgate.cache import ResponseCache
from flipgate.exitcodes import USAGE_ERROR
from flipgate.grammar import Manifest
from flipgate.regression.runs import RunRecord
from flipgate.results import Trial
from flipgate.store import AnalysisTable, TrialStore

ARC = """
audit:
  items_per_dataset: 2
  bootstrap: {n: 100}
  facets:
    option_order: {datasets: [arc_challenge]}
models:
  - {id: m1, backend: hf, source: {path: /nonexistent}, readouts: [regex]}
"""
OPTION_ORDER = str(REPO / "suites" / "order" / "test_option_order.py")


def one_clean_line(text: str, *fragments: str) -> None:
    """No traceback, and one output line holds every fragment."""
    assert "Traceback" not in text and 'File "' not in text, text[-3000:]
    lines = [line for line in text.splitlines() if all(f in line for f in fragments)]
    assert lines, f"no line with {fragments} in:\n{text[-3000:]}"


def filled(path: Path, rows: int = 2000) -> ResponseCache:
    """A response cache of ``rows`` entries, checkpointed into its main file."""
    cache = ResponseCache(path)
    cache.put_many("m", {f"k{i}": Output("x" * 300, {"A": -0.1}, 1, 1) for i in range(rows)})
    cache.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return cache


def full(conn: sqlite3.Connection) -> None:
    """No page more: SQLite's own "database or disk is full" on the next write that needs one."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages}")


def overwrite_middle(path: Path, zeros: bool = False) -> None:
    """Overwrite one page in the middle of a database file (garbage or zeros)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    at = (len(data) // page // 2) * page
    data[at : at + page] = bytes(page) if zeros else os.urandom(page)
    path.write_bytes(bytes(data))


def enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def erofs(*_args, **_kwargs):
    raise OSError(errno.EROFS, "Read-only file system")


# -- 1. a full disk or a read-only place -----------------------------------------------------------
def test_full_trials_store_is_one_line_naming_it_and_the_remedy(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    full(store.conn)
    with pytest.raises(FlipgateError) as err:
        store.add_analysis(AnalysisTable("envelope", "dataset"), "mmlu", {"big": "x" * 200_000})
    message = str(err.value)
    assert str(tmp_path / "trials.sqlite") in message and "\n" not in message
    assert "the disk is full" in message and "free disk space" in message
    assert "--runs-dir" in message


def test_read_only_trials_store_is_one_line(tmp_path):
    path = tmp_path / "trials.sqlite"
    TrialStore(path).conn.close()
    read_only = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    with pytest.raises(FlipgateError, match="not writable.*make it writable.*--runs-dir"):
        TrialStore(path, read_only).add_model("m", {}, {})


@pytest.mark.parametrize(
    ("fail", "expect"), [(enospc, "the disk is full"), (erofs, "not writable")]
)
def test_manifest_write_failure_is_one_line(tmp_path, monkeypatch, fail, expect):
    monkeypatch.setattr("flipgate.grammar.atomic_write", fail)
    manifest = Manifest.build("option_order", "arc", {"q1": 4})
    with pytest.raises(FlipgateError) as err:
        manifest.save(tmp_path / "manifests")
    message = str(err.value)
    assert message.startswith(f"manifest {manifest.path_in(tmp_path / 'manifests')}")
    assert expect in message and "--manifests-dir" in message


@pytest.mark.parametrize(
    ("fail", "expect"), [(enospc, "the disk is full"), (erofs, "not writable")]
)
def test_card_write_failure_is_one_line(tmp_path, monkeypatch, fail, expect):
    monkeypatch.setattr("flipgate.storage.atomic_write", fail)
    with pytest.raises(FlipgateError, match=f"GRID card .*x.json: {expect}.*--grid-cards-dir"):
        storage.write_text(storage.CARDS, tmp_path / "m" / "x.json", "{}")


def test_full_response_cache_warns_once_and_keeps_going(tmp_path):
    cache = filled(tmp_path / "responses.sqlite", rows=10)
    full(cache.conn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3):
            cache.put_many("m", {f"new{i}-{j}": Output("y" * 3000, {}, 1, 1) for j in range(40)})
        assert cache.get_many(["k1"]) == {}  # off for the rest of the process
        with cache.claim("m", "label"):  # no lock without a usable cache
            pass
    assert [type(w.message) for w in caught] == [storage.StorageWarning]
    message = str(caught[0].message)
    assert str(tmp_path / "responses.sqlite") in message and "the disk is full" in message
    assert "trials store" in message and "\n" not in message


def test_analysis_cache_write_failure_warns_once(tmp_path, monkeypatch):
    monkeypatch.setattr("flipgate.analysis_cache.atomic_write", enospc)
    cache = AnalysisCache(tmp_path / "analyses")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache.put("a", {"x": 1})
        cache.put("b", {"x": 2})
    assert len(caught) == 1 and "analysis cache" in str(caught[0].message)
    assert cache.get("a") is None


@pytest.mark.parametrize("junk", ["not json", "[1, 2]", ""])
def test_analysis_cache_reads_a_bad_file_as_a_miss(tmp_path, junk):
    (tmp_path / "a.json").write_text(junk)
    assert AnalysisCache(tmp_path).get("a") is None


# -- 2. a runs directory that is a file ------------------------------------------------------------
def test_runs_dir_that_is_a_file(tmp_path):
    (tmp_path / "runs").write_text("not a directory")
    with pytest.raises(FlipgateError, match="is a file, not a directory; point --runs-dir"):
        storage.ensure_dir(storage.RUNS, tmp_path / "runs")


@pytest.mark.parametrize("below", ["runs", "runs/deeper/still"])
def test_runs_dir_under_a_file(tmp_path, below):
    (tmp_path / "blocker").write_text("a file")
    with pytest.raises(FlipgateError) as err:
        storage.ensure_dir(storage.RUNS, tmp_path / "blocker" / below)
    message = str(err.value)
    assert f"{tmp_path / 'blocker'} is a file, not a directory" in message
    assert "point --runs-dir at a directory" in message
    with pytest.raises(FlipgateError, match="blocker is a file"):
        TrialStore(tmp_path / "blocker" / below / "trials.sqlite")


# -- 3. a corrupt response cache -------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["text", "garbage", "truncated", "page-overwritten", "zeroed"])
def test_corrupt_response_cache_is_one_line_naming_reset_cache(tmp_path, kind):
    path = tmp_path / "responses.sqlite"
    if kind == "text":
        path.write_text("responses, but as text\n" * 50)
    elif kind == "garbage":
        path.write_bytes(os.urandom(20_000))
    else:
        filled(path).conn.close()
        if kind == "truncated":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        else:
            overwrite_middle(path, zeros=kind == "zeroed")
    with pytest.raises(FlipgateError) as err:
        ResponseCache(path, check=True)
    message = str(err.value)
    assert message.startswith(f"response cache {path}: corrupt") and "--reset-cache" in message


def test_a_cache_that_fails_mid_run_is_warned_about_not_raised(tmp_path):
    path = tmp_path / "responses.sqlite"
    filled(path).conn.close()
    cache = ResponseCache(path)  # opened sound; then the file goes bad under it
    overwrite_middle(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = cache.get_many([f"k{i}" for i in range(2000)])
    assert found == {} and not cache.usable
    assert len(caught) == 1 and "--reset-cache" in str(caught[0].message)


def test_move_aside_renames_with_a_timestamp(tmp_path):
    path = tmp_path / "responses.sqlite"
    path.write_text("junk")
    Path(f"{path}-wal").write_text("wal")
    moved = storage.move_aside(path)
    assert moved is not None and moved.name.startswith("responses.sqlite.corrupt-")
    assert moved.read_text() == "junk" and Path(f"{moved}-wal").exists()
    assert not path.exists() and storage.move_aside(path) is None


# -- 4. an edited or truncated manifest ------------------------------------------------------------
def _manifest_on_disk(tmp_path: Path) -> tuple[Manifest, Path]:
    manifest = Manifest.build("option_order", "arc", {"q1": 4, "q2": 5, "q3": 2})
    return manifest, manifest.save(tmp_path)


def _swap_orderings(text: str) -> str:
    body = json.loads(text)
    body["entries"]["q1"][1], body["entries"]["q1"][2] = (
        body["entries"]["q1"][2],
        body["entries"]["q1"][1],
    )
    return json.dumps(body)


def _wrong_shape(text: str) -> str:
    body = json.loads(text)
    body["entries"] = [["q1", [0, 1]]]
    return json.dumps(body)


def _strings(text: str) -> str:
    body = json.loads(text)
    body["entries"]["q1"] = [["a", "b"]] * 6
    return json.dumps(body)


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (lambda t: t[: len(t) // 2], "not a manifest"),
        (lambda t: "", "not a manifest"),
        (lambda t: "these are my notes\n", "not a manifest"),
        (lambda t: t.replace('"entries"', '"entrys"'), "not a manifest"),
        (_wrong_shape, "not a manifest"),
        (_strings, "not a manifest"),
        (_swap_orderings, "orderings of item 'q1' differ from the grammar's"),
    ],
    ids=["truncated", "empty", "text", "renamed-key", "wrong-shape", "strings", "swapped"],
)
def test_bad_manifest_is_one_line_naming_it(tmp_path, edit, expect):
    manifest, path = _manifest_on_disk(tmp_path)
    path.write_text(edit(path.read_text()))
    with pytest.raises(FlipgateError) as err:
        manifest.save(tmp_path)
    message = str(err.value)
    assert message.startswith(f"manifest {path}: ") and expect in message
    assert "delete it to regenerate it" in message and "\n" not in message
    path.unlink()  # the remedy works
    assert manifest.save(tmp_path) == path


# -- 5. a damaged baseline store -------------------------------------------------------------------
def baseline_store(path: Path, n: int = 600) -> Path:
    """A finished run's trials store with enough trials to fill many pages."""
    store = TrialStore(path)
    store.add_model("m1", {"weights_sha256": "w"}, {"readouts": ["regex"]})
    trials = [
        Trial(
            run_id="r",
            model_id="m1",
            model_fingerprint="f",
            dataset="arc_challenge",
            item_id=f"q{i}",
            facet="option_order",
            condition=c,
            permutation=[0, 1, 2, 3],
            sample=0,
            prompt_sha256="p" * 64,
            raw_output=json.dumps({"text": "A" * 200}),
            readouts={"regex": "A"},
            mapped={"regex": "A"},
            correct={"regex": True},
            gold="A",
            n_classes=4,
            tokens_in=10,
            tokens_out=1,
            latency_s=0.1,
            cost_usd=0.0,
            from_cache=False,
        )
        for i in range(n // 6)
        for c in range(6)
    ]
    store.add_trials(trials)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.conn.close()
    return path


@pytest.mark.parametrize("zeros", [False, True], ids=["garbage-page", "zeroed-page"])
def test_damaged_baseline_is_one_line_when_opened(tmp_path, zeros):
    path = baseline_store(tmp_path / "run" / "trials.sqlite")
    RunRecord.open(path)  # sound before
    overwrite_middle(path, zeros)
    with pytest.raises(FlipgateError) as err:
        RunRecord.open(path)
    message = str(err.value)
    assert message.startswith(f"baseline {path}: corrupt") and "--baseline" in message


def test_unreadable_baseline_rows_are_one_line(tmp_path):
    path = baseline_store(tmp_path / "trials.sqlite", n=12)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE trials SET readouts = 'not json' WHERE item_id = 'q0'")
    conn.commit()
    conn.close()
    with pytest.raises(FlipgateError, match=r"baseline .*trials.sqlite: corrupt.*unreadable trial"):
        RunRecord.open(path).trials("m1", "arc_challenge", "option_order")


# -- 6. no stale lock files ------------------------------------------------------------------------
def _count_under_lock(lock_path: str, counter: str, rounds: int) -> None:
    for _ in range(rounds):
        with storage.lock(lock_path):
            value = int(Path(counter).read_text())
            Path(counter).write_text(str(value + 1))


@pytest.mark.slow
def test_lock_is_exclusive_between_processes_and_leaves_no_file(tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    lock_path = str(tmp_path / "responses.sqlite.0123456789abcdef.lock")
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_count_under_lock, args=(lock_path, str(counter), 60))
        for _ in range(3)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    assert counter.read_text() == "180"  # no lost update: one holder at a time
    assert list(tmp_path.glob("*.lock")) == []


def test_cache_claims_and_manifests_leave_no_lock_files(tmp_path):
    cache = ResponseCache(tmp_path / "cache" / "responses.sqlite")
    for label in ("a", "b", "c"):
        with cache.claim("m1", label):
            assert len(list((tmp_path / "cache").glob("*.lock"))) == 1
    Manifest.build("option_order", "arc", {"q1": 4}).save(tmp_path / "manifests")
    assert list(tmp_path.rglob("*.lock")) == []


def test_a_lock_file_left_by_a_killed_process_is_taken_and_removed(tmp_path):
    stale = tmp_path / "responses.sqlite.feedfacefeedface.lock"
    stale.write_text("")  # a native lock dies with its holder; the file may stay
    with storage.lock(stale):
        pass
    assert not stale.exists()


# -- the suite as a user runs it -------------------------------------------------------------------
def test_runs_dir_that_is_a_file_ends_the_run_with_one_line(tmp_path, capsys):
    runs = tmp_path / "runs-file"
    runs.write_text("x")
    case = Case("runs-file", models=ARC, args=("--runs-dir", str(runs)))
    status, text = run_in_process(tmp_path, case, capsys, OPTION_ORDER, collect_only=False)
    assert status == USAGE_ERROR, text[-3000:]
    one_clean_line(text, str(runs), "is a file, not a directory", "--runs-dir")


@pytest.mark.parametrize(
    "option", ["--runs-dir", "--cache-dir", "--manifests-dir", "--grid-cards-dir"]
)
def test_an_uncreatable_directory_ends_the_run_with_one_line(tmp_path, capsys, option):
    (tmp_path / "blocker").write_text("x")
    case = Case(option, models=ARC, args=(option, str(tmp_path / "blocker" / "sub")))
    status, text = run_in_process(tmp_path, case, capsys, OPTION_ORDER, collect_only=False)
    assert status == USAGE_ERROR, text[-3000:]
    one_clean_line(text, "blocker is a file, not a directory", option)


@pytest.mark.parametrize("kind", ["text", "page-overwritten"])
def test_corrupt_cache_ends_the_run_with_one_line(tmp_path, capsys, kind):
    path = tmp_path / "cache" / "responses.sqlite"
    path.parent.mkdir()
    if kind == "text":
        path.write_text("hello\n" * 100)
    else:
        filled(path).conn.close()
        overwrite_middle(path)
    case = Case(kind, models=ARC)
    status, text = run_in_process(tmp_path, case, capsys, OPTION_ORDER, collect_only=False)
    assert status == USAGE_ERROR, text[-3000:]
    one_clean_line(text, str(path), "corrupt", "--reset-cache")


@pytest.mark.parametrize("edit", ["truncated", "swapped"])
def test_bad_manifest_fails_its_cell_with_one_line(tmp_path, capsys, edit):
    from flipgate.calls import Auditor, Paths
    from flipgate.config import load_models

    (tmp_path / "m.yaml").write_text(ARC)
    paths = Paths(tmp_path / "s.sqlite", None, tmp_path / "manifests", tmp_path / "cache")
    Auditor(load_models(tmp_path / "m.yaml"), "r", paths).plans.cell_plan(
        "arc_challenge", "option_order"
    )
    (path,) = (tmp_path / "manifests").glob("option_order__arc_challenge__*.json")
    text = path.read_text()
    path.write_text(text[: len(text) // 2] if edit == "truncated" else _swap_orderings_first(text))
    status, out = run_in_process(
        tmp_path, Case(edit, models=ARC), capsys, OPTION_ORDER, collect_only=False
    )
    assert status == USAGE_ERROR, out[-3000:]
    one_clean_line(out, f"manifest {path}", "delete it to regenerate it")


def _swap_orderings_first(text: str) -> str:
    body = json.loads(text)
    first = sorted(body["entries"])[0]
    body["entries"][first][1], body["entries"][first][2] = (
        body["entries"][first][2],
        body["entries"][first][1],
    )
    return json.dumps(body)


def test_damaged_baseline_ends_the_run_with_one_line(tmp_path, capsys):
    path = baseline_store(tmp_path / "baseline" / "trials.sqlite")
    overwrite_middle(path)
    case = Case("baseline", models=ARC, args=("--baseline", str(path)))
    status, text = run_in_process(tmp_path, case, capsys, OPTION_ORDER)
    assert status == USAGE_ERROR, text[-3000:]
    one_clean_line(text, f"baseline {path}", "corrupt", "--baseline")


GATED = "thresholds:\n  - {metric: flip_rate, max: 1.0, rule: lower}\n"


def tiny_models(model_dir: Path) -> str:
    return (
        "audit:\n  items_per_dataset: 2\n  bootstrap: {n: 100}\n"
        "  facets:\n    option_order: {datasets: [arc_challenge]}\n"
        f'models:\n  - {{id: tiny, backend: hf, source: {{path: "{model_dir}"}}, '
        "max_new_tokens: 2}\n"
    )


def filling_up(monkeypatch, place: storage.Place) -> None:
    """Every database of ``place`` opened from now on has no room for one more page."""
    connect = storage.connect

    def opened(where: storage.Place, path, schema):
        conn = connect(where, path, schema)
        if where == place:
            full(conn)
        return conn

    monkeypatch.setattr(storage, "connect", opened)


@pytest.mark.slow
def test_a_run_leaves_no_lock_files(tmp_path, capsys, tiny_model_dir):
    case = Case("locks", models=tiny_models(tiny_model_dir), thresholds=GATED)
    status, text = run_in_process(tmp_path, case, capsys, OPTION_ORDER, collect_only=False)
    assert status == 0, text[-3000:]
    assert (tmp_path / "cache" / "responses.sqlite").exists()
    assert list(tmp_path.rglob("*.lock")) == []


@pytest.mark.slow
def test_a_full_cache_loses_no_answer(tmp_path, capsys, tiny_model_dir, monkeypatch):
    # packed pages (VACUUM) and no page more: the run's first new answers need a page split
    cache = filled(tmp_path / "cache" / "responses.sqlite")
    cache.conn.execute("VACUUM")
    cache.conn.close()
    filling_up(monkeypatch, storage.CACHE)
    case = Case("cache-full", models=tiny_models(tiny_model_dir), thresholds=GATED)
    status, text = run_in_process(tmp_path, case, capsys, OPTION_ORDER, collect_only=False)
    assert status == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "the disk is full" in text and "StorageWarning" in text, text[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    trials = TrialStore(run / "trials.sqlite").trials(model_id="tiny")
    assert len(trials) == 2 * 6 and not trials["from_cache"].any()  # every answer recorded


def test_a_full_runs_disk_ends_the_run_with_one_line(tmp_path, capsys, tiny_model_dir, monkeypatch):
    filling_up(monkeypatch, storage.RUNS)
    case = Case("runs-full", models=tiny_models(tiny_model_dir), thresholds=GATED)
    status, text = run_in_process(tmp_path, case, capsys, OPTION_ORDER, collect_only=False)
    assert status == USAGE_ERROR, text[-3000:]
    one_clean_line(text, "trials store", "the disk is full", "free disk space", "--runs-dir")


# -- the Allure results folder: read-only or full, before and during a run (#60) ----------------
@pytest.mark.parametrize(
    ("fail", "expect"), [(enospc, "the disk is full"), (erofs, "not writable")]
)
def test_a_results_folder_that_cannot_be_written_is_refused_before_the_run(
    tmp_path, monkeypatch, fail, expect
):
    """A marked (or new) Allure results folder where no file can be written: one line naming the
    setting before anything runs, not an INTERNALERROR from allure-pytest's first write."""
    from flipgate import results_dir

    marked = tmp_path / "allure-results"
    results_dir.prepare(marked, tmp_path, "flipgate_alluredir = 'x'")  # marks it
    monkeypatch.setattr("flipgate.storage.tempfile.mkstemp", fail)
    for folder in (marked, tmp_path / "new-results"):
        with pytest.raises(FlipgateError) as err:
            results_dir.prepare(folder, tmp_path, "flipgate_alluredir = 'x'")
        message = str(err.value)
        assert expect in message and "flipgate_alluredir = 'x'" in message and "\n" not in message


@pytest.mark.parametrize(
    ("hook", "kwargs", "fail"),
    [
        ("report_result", {"result": object()}, enospc),
        ("report_container", {"container": object()}, erofs),
        ("report_attached_data", {"body": b"png", "file_name": "a.png"}, enospc),
        ("report_attached_file", {"source": "x.csv", "file_name": "a.csv"}, erofs),
    ],
)
def test_allure_writes_that_fail_mid_run_are_kept_for_one_line(tmp_path, hook, kwargs, fail):
    """allure-pytest's write failing mid-run (disk full, read-only) is kept by the guard, not
    raised through pytest (an INTERNALERROR); its line names the folder and the remedy."""
    import allure_commons

    from flipgate.results_dir import WriteGuard

    class Writer:  # allure's file logger, on a disk that is full or read-only
        @allure_commons.hookimpl
        def report_result(self, result):
            fail()

        @allure_commons.hookimpl
        def report_container(self, container):
            fail()

        @allure_commons.hookimpl
        def report_attached_data(self, body, file_name):
            fail()

        @allure_commons.hookimpl
        def report_attached_file(self, source, file_name):
            fail()

    guard, writer = WriteGuard(), Writer()
    allure_commons.plugin_manager.register(writer)
    allure_commons.plugin_manager.register(guard)
    try:
        getattr(allure_commons.plugin_manager.hook, hook)(**kwargs)  # does not raise
        getattr(allure_commons.plugin_manager.hook, hook)(**kwargs)
    finally:
        allure_commons.plugin_manager.unregister(guard)
        allure_commons.plugin_manager.unregister(writer)
    line = guard.line(tmp_path, "--alluredir 'r'")
    assert line is not None and "\n" not in line and str(tmp_path) in line
    assert ("the disk is full" if fail is enospc else "not writable") in line
    assert WriteGuard().line(tmp_path, "--alluredir 'r'") is None  # a folder that was fine


TEARDOWN_TEST = """
import pytest
from flipgate import FlipgateError
from flipgate.store import TrialStore


@pytest.fixture
def full_store(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    yield store
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count={pages}")
    store.add_model("m", {"big": "x" * 200_000}, {})  # the disk fills up at teardown


@pytest.fixture
def failing_setup():
    raise FlipgateError("models.yaml: field 'x': bad value 3")


def test_teardown(full_store):
    pass


def test_setup(failing_setup):
    pass
"""


def test_a_flipgate_error_in_a_fixture_is_one_line_not_a_traceback(tmp_path):
    """A FlipgateError in a fixture's setup or teardown (a store whose disk filled up) is reported
    as its one line, as a cell's is, not a page of traceback ending in it."""
    from support.forked import run_pytest
    from support.suite_runs import suite_env

    (tmp_path / "test_phases.py").write_text(TEARDOWN_TEST)
    proc = run_pytest(
        ["-p", "no:cacheprovider", "-q", "test_phases.py"], suite_env(), 120, tmp_path
    )
    out = proc.stdout
    assert "ERROR at teardown of test_teardown" in out and "ERROR at setup of test_setup" in out
    assert "Traceback" not in out and "site-packages" not in out and "def full_store" not in out
    assert "flipgate: trials store" in out and "the disk is full" in out
    assert "flipgate: models.yaml: field 'x': bad value 3" in out
