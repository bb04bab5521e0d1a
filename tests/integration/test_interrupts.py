"""Interrupting an audit (flipgate/interrupts.py, docs/ci.md "Interrupting a run"): SIGINT and
SIGTERM end it with exit status 2 and no traceback, the trials store records the interruption,
the cards of what finished are written and marked partial (or one line says there are none), and
``flipgate baseline`` refuses the run.

The subprocess tests audit an API model behind a slow loopback server (each answer 0.15 s, one at
a time), so the signal lands while a cell is part-way."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cards import typed
from support.loopback_server import Faults, LoopbackServer
from support.paths import write
from support.scripted import ScriptedBackend
from support.suite_runs import suite_command, suite_env
from support.suites import SUITES

from flipgate import registry
from flipgate.cards import validate_card, write_cards
from flipgate.cards.markdown import PARTIAL, card_markdown
from flipgate.exitcodes import INTERRUPTED, USAGE_ERROR
from flipgate.regression.cli import promote_main
from flipgate.results import Trial

KEY = "sk-flipgate-interrupt-test"
THRESHOLDS = """
level: 0.95
thresholds:
  - {metric: parse_rate, min: 0.0, rule: point}
  - {metric: flip_rate, max: 1.0, rule: lower}
  - {metric: flip_rate, facet: same_ordering, max: 1.0, rule: upper}
"""
#: how long a test waits for the audit to reach the point it interrupts, and then to end
WAIT_S = 90


@pytest.fixture(scope="module")
def slow_server():
    """Always answers "A", 0.15 s per request."""
    server = LoopbackServer(
        ScriptedBackend(rule=lambda r: "A"), api_key=KEY, faults=Faults(slow=1.0, slow_s=0.15)
    )
    server.start()
    yield server
    server.stop()


def start_audit(tmp: Path, server: LoopbackServer, *extra: str) -> subprocess.Popen:
    """The audit of one API model on arc_challenge's option order (8 items, K=6: a cell's first
    batch is 48 answers, 7 s or more) in its own process group, as a terminal starts it."""
    models = write(
        tmp / "models.yaml",
        f"""
audit:
  k: 6
  items_per_dataset: 8
  bootstrap: {{n: 100}}
  facets:
    option_order: {{datasets: [arc_challenge]}}
models:
  - id: api
    backend: litellm
    readouts: [regex]
    concurrency: 1
    source: {{model: openai/scripted, api_base: "{server.base_url}", api_key_env: FG_TEST_KEY}}
""",
    )
    thresholds = write(tmp / "thresholds" / "default.yaml", THRESHOLDS).parent
    cmd = suite_command(tmp, models, thresholds, *extra)
    env = suite_env(FG_TEST_KEY=KEY, LITELLM_LOCAL_MODEL_COST_MAP="True")
    return subprocess.Popen(
        cmd,
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def store_of(tmp: Path) -> Path | None:
    stores = list((tmp / "runs").glob("*/trials.sqlite"))
    return stores[0] if stores else None


def trials_in(store: Path) -> int | None:
    """The store's trials, None while it has no trials table yet."""
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def wait_until(proc: subprocess.Popen, tmp: Path, ready) -> Path:
    """The run's store, once ``ready(trials)`` holds (the audit still running)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        store = store_of(tmp)
        n = trials_in(store) if store is not None else None
        if n is not None and ready(n):
            return store
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the audit never reached the point to interrupt: {proc.communicate()[0]}")


def meta_of(store: Path) -> dict:
    conn = sqlite3.connect(store)
    try:
        return {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    finally:
        conn.close()


@pytest.mark.slow
def test_ctrl_c_twice_under_xdist_exits_2_with_the_partial_cards_and_no_baseline(
    slow_server, tmp_path, capsys
):
    proc = start_audit(tmp_path, slow_server, "-n", "2")
    store = wait_until(proc, tmp_path, lambda n: n > 0)  # a cell part-way: its first batch in
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the controller and both workers
    time.sleep(0.4)
    os.killpg(proc.pid, signal.SIGINT)
    out = proc.communicate(timeout=WAIT_S)[0]
    assert proc.returncode == INTERRUPTED, out[-3000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    assert "flipgate: SIGINT again: still stopping" in out
    assert (
        "flipgate: run interrupted (SIGINT): exit status 2; 1 GRID card(s) of what it recorded, "
        "marked partial" in out
    ), out[-3000:]
    meta = meta_of(store)
    assert meta["exit_status"] == INTERRUPTED and meta["interrupted"] == "SIGINT"
    assert "finished" in meta
    card = json.loads((tmp_path / "cards/api/arc_challenge.json").read_text())
    validate_card(card)
    assert card["run"]["interrupted"] == "SIGINT"
    markdown = (tmp_path / "cards/api/arc_challenge.md").read_text()
    assert f"**{PARTIAL}** (SIGINT)" in markdown
    capsys.readouterr()
    assert promote_main([str(store.parent), "--to", str(tmp_path / "baseline")]) == USAGE_ERROR
    refused = capsys.readouterr()
    assert refused.out == "" and refused.err.count("\n") == 1, refused
    assert "it was interrupted (SIGINT; exit status 2)" in refused.err, refused.err
    assert not (tmp_path / "baseline").exists()


@pytest.mark.slow
def test_sigterm_to_the_controller_before_any_answer_exits_2_and_says_no_card(
    slow_server, tmp_path
):
    proc = start_audit(tmp_path, slow_server)
    store = wait_until(proc, tmp_path, lambda n: n == 0)  # collected, no trial yet
    os.kill(proc.pid, signal.SIGTERM)  # `kill PID`: the default would end it silently (143)
    out = proc.communicate(timeout=WAIT_S)[0]
    assert proc.returncode == INTERRUPTED, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert trials_in(store) == 0
    assert (
        "flipgate: run interrupted (SIGTERM): exit status 2; no GRID card written: it recorded "
        "nothing to build one from" in out
    ), out[-3000:]
    assert "trials are kept in" not in out
    assert not list((tmp_path / "cards").glob("*/*.json"))
    meta = meta_of(store)
    assert meta["exit_status"] == INTERRUPTED and meta["interrupted"] == "SIGTERM"


# -- cards of an interrupted run, without a subprocess ----------------------------------------


def envelope_trials_only(store, dataset: str) -> None:
    """Copies of six option-order trials as an envelope configuration's on ``dataset``, and
    nothing else there: the envelope cell was interrupted before it recorded its analysis."""
    cursor = store.conn.execute("SELECT * FROM trials WHERE facet = 'option_order' LIMIT 6")
    names = [d[0] for d in cursor.description]
    trials = []
    for row in cursor.fetchall():
        data = dict(zip(names, row, strict=True))
        for key in ("permutation", "readouts", "mapped", "correct"):
            data[key] = json.loads(data[key])
        data |= {"dataset": dataset, "facet": "envelope[T1-greedy-0-free_form-fp32]"}
        trials.append(Trial.model_validate(data))
    assert len(trials) == 6
    store.add_trials(trials)


def test_a_dataset_with_only_a_suites_unfinished_trials_has_no_card_and_the_rest_are_written(
    card_store,  # noqa: F811 - the fixture imported above
    tmp_path,
):
    envelope_trials_only(card_store, "bbq_lite")
    written = write_cards(
        card_store, tmp_path / "cards", "r1", n_boot=200, suites=registry.suites()
    )
    assert [(c.card.model.id, c.card.dataset.name) for c in written.cards] == [
        ("scripted", "arc_challenge")
    ]
    assert len(written.missing) == 1 and written.missing[0].startswith(
        "scripted/bbq_lite: only a suite's cells ran on it, and none of them recorded a result"
    ), written.missing
    assert not (tmp_path / "cards/scripted/bbq_lite.json").exists()


def test_an_interrupted_runs_card_is_marked_partial_and_no_verdict_is_a_bare_pass(
    card_store,  # noqa: F811 - the fixture imported above
    tmp_path,
):
    card_store.add_verdicts(
        "scripted", "arc_challenge", "same_ordering:option_order", typed([{"verdict": "pass"}])
    )
    whole = (
        write_cards(card_store, tmp_path / "cards", "r1", n_boot=200, suites=SUITES)
        .cards[0]
        .card.to_data()
    )
    assert "interrupted" not in whole["run"] and PARTIAL not in card_markdown(whole, SUITES)
    card_store.record_end("2026-01-01T00:00:00+00:00", INTERRUPTED, "SIGINT")
    assert card_store.interruption() == "SIGINT"
    card = (
        write_cards(card_store, tmp_path / "cards", "r1", n_boot=200, suites=SUITES)
        .cards[0]
        .card.to_data()
    )
    validate_card(card)
    assert card["run"]["interrupted"] == "SIGINT"
    assert {v["verdict"] for v in card["thresholds"]} == {"pass", "fail"}
    markdown = card_markdown(card, SUITES)
    assert f"**{PARTIAL}** (SIGINT)" in markdown
    rows = [line for line in markdown.splitlines() if "**pass**" in line or "**fail**" in line]
    assert len(rows) == 2 and all(f"({PARTIAL})" in line for line in rows), rows
    card_store.record_end("2026-01-01T00:00:01+00:00", 0, None)  # a whole end clears the mark
    assert card_store.interruption() is None


def test_the_kept_trials_line_is_true_of_an_empty_store(card_store, tmp_path):
    from flipgate.session import kept_line
    from flipgate.store import TrialStore

    empty = TrialStore(tmp_path / "empty" / "trials.sqlite")
    assert kept_line(empty.path, empty) == f"flipgate: no trials recorded (its store: {empty.path})"
    assert kept_line(card_store.path, card_store) == (
        f"flipgate: trials are kept in {card_store.path}"
    )
    assert kept_line(empty.path, None) == f"flipgate: trials are kept in {empty.path}"


def test_the_first_signal_interrupts_the_second_is_one_line_and_a_finaliser_drops_it(capfd):
    from types import SimpleNamespace

    from flipgate.interrupts import Interrupts

    reasons: list[str] = []
    handler = Interrupts(reasons.append, speak=True)
    seen: list[object] = []
    previous, before = sys.unraisablehook, signal.getsignal(signal.SIGTERM)
    sys.unraisablehook = seen.append  # stands for pytest's
    try:
        handler.install()
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs between bytecodes: here
        assert reasons == ["interrupted by SIGTERM"] and handler.received == "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt now: the run is stopping
        time.sleep(0.05)
        assert reasons == ["interrupted by SIGTERM"] and handler.received == "SIGTERM"
        assert "flipgate: SIGINT again: still stopping" in capfd.readouterr().err
        dropped = SimpleNamespace(exc_type=KeyboardInterrupt)  # raised inside a __del__
        other = SimpleNamespace(exc_type=ValueError)
        sys.unraisablehook(dropped)
        sys.unraisablehook(other)
        assert seen == [other]
    finally:
        handler.uninstall()
        sys.unraisablehook = previous
    assert signal.getsignal(signal.SIGTERM) == before
