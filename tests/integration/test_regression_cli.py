"""`python -m flipgate compare` / `baseline` (docs/definitions.md §11) on small run stores built
directly, and the reports/baseline default of scripts/audit (run against a stub Makefile and python,
no real audit)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.paths import REPO
from support.regression_runs import FACET, THRESHOLDS, K, make_run, runs_root

from flipgate.__main__ import main
from flipgate.exitcodes import USAGE_ERROR
from flipgate.regression.runs import RunRecord
from flipgate.store import TRIAL_COLUMNS, TrialStore


def flipping(i: int, condition: int) -> str:
    """Right under the canonical ordering, but 15 of 20 items change their answer when reordered."""
    return "A" if condition == 0 or i >= 15 else "B"


@pytest.fixture
def runs(tmp_path):
    return runs_root(tmp_path)


def compare(capsys, *args) -> tuple[int, str, str]:
    code = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean_error(code: int, out: str, err: str, *needles: str) -> None:
    assert code == USAGE_ERROR, (out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flipgate: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_no_regression_exits_0(runs, capsys):
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base")
    cand = make_run(root, "20260102T000000Z-cand")
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds)
    assert code == 0, err
    assert "| m vs m@20260101T000000Z-base | option_order | ds_a | delta_flip_rate |" in out
    # 20 items with no discordant pair cannot prove a delta within 0.05 (exact paired test:
    # at δ = 0.05 with no churn, P[no discordant pair in 20] = 0.95^20 = 0.358 > 0.05); the
    # lower rule passes it with a warning, and the row names both tests
    row = next(line for line in out.splitlines() if "delta_flip_rate" in line)
    assert "inconclusive" in row and "p = 0.3585" in row and "| fail" not in out
    assert "1 cell compared, 0 skipped, 0 regressions" in out
    assert err == ""


@pytest.mark.slow
def test_regression_exits_1_via_subprocess(runs):
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base")
    cand = make_run(root, "20260102T000000Z-cand", answer=flipping)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "flipgate",
            "compare",
            str(base / "trials.sqlite"),
            str(cand),
            "--thresholds",
            str(thresholds),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 1, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if "delta_flip_rate" in line)
    assert "fail" in row and "+0.750" in row and "▲ worse" in row
    assert "exact paired (unconditional) p = " in row
    accuracy = next(line for line in proc.stdout.splitlines() if "delta_accuracy" in line)
    assert "inconclusive" in accuracy
    assert "1 cell compared, 0 skipped, 1 regression" in proc.stdout


def test_json_format_parses(runs, capsys):
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base")
    cand = make_run(root, "20260102T000000Z-cand", answer=flipping, datasets=("ds_a", "ds_b"))
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds, "--format", "json")
    assert code == 1
    data = json.loads(out)
    assert [c["dataset"] for c in data["comparisons"]] == ["ds_a"]
    assert {r["metric"]: r["outcome"] for r in data["rows"]}["delta_flip_rate"] == "fail"
    assert data["comparisons"][0]["baseline_identity"]["run_id"] == "20260101T000000Z-base"
    assert (
        data["comparisons"][0]["baseline_identity"]["weights_sha256"] == "w-m-20260101T000000Z-base"
    )
    [skip] = data["skipped"]
    assert (skip["cell"], skip["dataset"]) == (FACET, "ds_b") and "not a pass" in skip["reason"]
    assert data["summary"]["regressions"] == 1 and data["summary"]["compared"] == 1
    assert "1 cell compared, 1 skipped, 1 regression" in err


def test_missing_baseline_cell_is_skipped_not_passed(runs, capsys):
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base")
    cand = make_run(root, "20260102T000000Z-cand", datasets=("ds_a", "ds_b"))
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds)
    assert code == USAGE_ERROR and "not everything was checked" in err  # nothing may pass unchecked
    assert "skipped: m vs m@20260101T000000Z-base on option_order × ds_b:" in out
    assert "| ds_b |" not in out


def test_declared_baseline_and_unmatched_candidate(runs, capsys):
    """A candidate is paired with the `baseline:` its stored config declares; one with no match in
    the baseline run is a skipped line, and a comparison of nothing at all is an error, not a
    pass."""
    root, thresholds = runs
    base = root / "base"
    make_run(root, "base", model="old")
    store = TrialStore(base / "trials.sqlite")
    store.add_model("other", {}, {"readouts": ["regex"], "primary_readout": "regex"})
    store.conn.close()
    cand = make_run(root, "cand", model="new", config={"baseline": "old"})
    code, out, _ = compare(capsys, base, cand, "--thresholds", thresholds)
    assert code == 0 and "| new vs old@base |" in out
    lone = make_run(root, "lone", model="stranger")
    code, out, err = compare(capsys, base, lone, "--thresholds", thresholds)
    assert_clean_error(code, out, err, "nothing compared", "no model 'stranger'")


@pytest.mark.parametrize(
    "case",
    [
        "missing-baseline",
        "missing-candidate",
        "not-sqlite",
        "other-schema",
        "grammar-1",
        "seed-7",
        "incomparable",
        "unknown-candidate",
        "bad-option",
        "no-thresholds",
    ],
)
def test_bad_input_exits_4_with_one_clean_line(runs, capsys, case):
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base")
    cand = make_run(root, "20260102T000000Z-cand")
    extra, needles = [], []
    if case == "missing-baseline":
        base, needles = root / "nope", ["baseline ", "no such run directory"]
    elif case == "missing-candidate":
        cand, needles = root / "nope" / "trials.sqlite", ["candidate ", "no such run directory"]
    elif case == "not-sqlite":
        base = root / "junk" / "trials.sqlite"
        base.parent.mkdir()
        base.write_text("not a database, just text\n" * 100)
        needles = ["baseline ", "not a flipgate trials store"]
    elif case == "other-schema":
        cand = root / "foreign.sqlite"
        with sqlite3.connect(cand) as conn:
            conn.execute("CREATE TABLE trials (x INTEGER)")
        needles = ["candidate ", "not a flipgate trials store", "lacks columns"]
    elif case == "grammar-1":
        base = make_run(root, "old-grammar", meta={"grammar_version": 1})
        needles = ["baseline ", "grammar version 1"]
    elif case == "seed-7":
        base = make_run(root, "seed7", meta={"seed": 7})
        needles = ["baseline ", "seed 7"]
    elif case == "incomparable":
        cand = make_run(root, "other-items", items=range(5, 25))
        needles = ["did not answer the same manifest", "--baseline-partial"]
    elif case == "unknown-candidate":
        extra, needles = ["--candidate", "ghost"], ["--candidate 'ghost'", "models: m"]
    elif case == "bad-option":
        extra, needles = ["--format", "html"], ["invalid choice"]
    elif case == "no-thresholds":
        thresholds, needles = root / "no-thresholds", ["default.yaml"]
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds, *extra)
    assert_clean_error(code, out, err, *needles)


def files(root: Path) -> list[tuple[Path, int]]:
    """Every file under ``root`` with its size, but SQLite's -shm / -wal sidecars, which a read-only
    connection to a WAL-mode store creates (TrialStore.read_only; the stores themselves are
    unchanged)."""
    return sorted(
        (p.relative_to(root), p.stat().st_size)
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(("-shm", "-wal"))
    )


def test_errors_write_nothing(runs, capsys):
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base", meta={"seed": 7})
    cand = make_run(root, "20260102T000000Z-cand", answer=flipping)
    other = make_run(root, "20260103T000000Z-other", answer=flipping)
    before = files(root.parent)
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds)
    assert_clean_error(code, out, err)
    code, out, err = compare(capsys, cand, other, "--thresholds", thresholds)
    assert code == 0
    assert files(root.parent) == before


def test_baseline_partial_compares_shared_pairs(runs, capsys):
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base")
    cand = make_run(root, "20260102T000000Z-cand", items=range(5, 25), sha="cd" * 32)
    code, out, err = compare(
        capsys, base, cand, "--thresholds", thresholds, "--baseline-partial", "--format", "json"
    )
    assert code == 0, err
    [comparison] = json.loads(out)["comparisons"]
    assert comparison["overlap"]["shared_items"] == 15 and comparison["overlap"]["partial"]


def test_candidate_option_selects_one_model(runs, capsys):
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base")
    cand = make_run(root, "20260102T000000Z-cand", answer=flipping)
    store = TrialStore(cand / "trials.sqlite")
    store.add_model(
        "idle", {}, {"readouts": ["regex"], "primary_readout": "regex"}
    )  # no order cell
    store.conn.close()
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds, "--candidate", "m")
    assert code == 1 and "| m vs m@" in out
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds, "--candidate", "idle")
    assert_clean_error(code, out, err, "--candidate 'idle'")


def test_compare_help_exits_0(capsys):
    assert main(["compare", "--help"]) == 0
    assert "BASELINE" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------- baseline


def promote(capsys, *args) -> tuple[int, str, str]:
    code = main(["baseline", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def count(path: Path) -> int:
    return RunRecord.open(path).store.conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]


def test_promote_latest_run(runs, capsys):
    root, thresholds = runs
    make_run(root, "20260101T000000Z-old")
    latest = make_run(root, "20260102T000000Z-new", answer=flipping)
    (latest / "cost_projection.json").write_text('{"total_usd": 0}\n')
    (root / "20260103T000000Z-empty").mkdir()  # no trials store: not a run to promote
    to = root.parent / "baseline"
    code, out, err = promote(capsys, "--runs-dir", root, "--to", to)
    assert code == 0, err
    assert out.count("\n") == 1 and "20260102T000000Z-new" in out
    assert count(to) == count(latest) == 80
    assert RunRecord.open(to).run_id == "20260102T000000Z-new"
    promoted = json.loads((to / "PROMOTED.json").read_text())
    assert promoted["run_id"] == "20260102T000000Z-new" and promoted["source"] == str(
        latest.resolve()
    )
    assert (to / "cost_projection.json").read_text() == '{"total_usd": 0}\n'
    assert sorted(p.name for p in to.iterdir()) == [
        "PROMOTED.json",
        "cost_projection.json",
        "trials.sqlite",
    ]
    # a baseline directory inside the runs directory is not itself "the latest run"
    inside = root / "zz-baseline"
    assert promote(capsys, "--runs-dir", root, "--to", inside)[0] == 0
    code, out, _ = promote(capsys, "--runs-dir", root, "--to", inside)
    assert code == 0 and "20260102T000000Z-new" in out
    # the promoted baseline is what compare reads: against the run it was promoted from, it is
    # one run on both sides, refused rather than "0 regressions"
    code, out, err = compare(capsys, to, latest, "--thresholds", thresholds)
    assert_clean_error(code, out, err, "are the same run 20260102T000000Z-new")
    code, out, _ = compare(capsys, to, root / "20260101T000000Z-old", "--thresholds", thresholds)
    assert code == 0 and "| m vs m@20260102T000000Z-new |" in out


def test_promote_named_run_includes_wal_and_replaces(runs, capsys):
    root, _ = runs
    to = root.parent / "baseline"
    make_run(root, "first")
    assert promote(capsys, root / "first", "--to", to)[0] == 0
    assert (to / "cost_projection.json").exists() is False
    # a run still open by its writer: its trials are in the WAL, not yet in the main file
    run = make_run(root, "second", items=range(30), close=False)
    assert (run / "trials.sqlite-wal").stat().st_size > 0
    code, out, err = promote(capsys, run / "trials.sqlite", "--to", to)
    assert code == 0, err
    assert count(to) == 30 * K
    assert json.loads((to / "PROMOTED.json").read_text())["run_id"] == "second"
    assert not list(to.glob(".*.tmp"))


def test_promoted_json_records_what_was_promoted(runs, capsys):
    """PROMOTED.json names the flipgate that promoted the run and every (model, cell, dataset) the
    baseline holds with its trials; the printed line sums them up."""
    root, _ = runs
    run = make_run(root, "20260101T000000Z-two", model="m", datasets=("ds_a", "ds_b"))
    make_run(root, "20260101T000000Z-two", model="acme/other", items=range(5))  # same store
    columns = ", ".join("?" if c == "facet" else c for c in TRIAL_COLUMNS)
    with sqlite3.connect(run / "trials.sqlite") as conn:  # a control cell of m: 8 trials
        conn.execute(
            f"INSERT INTO trials SELECT {columns} FROM trials WHERE model_id = 'm' AND "
            "dataset = 'ds_a' LIMIT 8",
            (f"same_ordering:{FACET}",),
        )
    conn.close()
    to = root.parent / "baseline"
    code, out, err = promote(capsys, run, "--to", to)
    assert code == 0, err
    promoted = json.loads((to / "PROMOTED.json").read_text())
    assert promoted["flipgate_version"] == importlib.metadata.version("flipgate")
    assert promoted["cells"] == [
        {"model": "acme/other", "cell": FACET, "dataset": "ds_a", "trials": 5 * K},
        {"model": "m", "cell": FACET, "dataset": "ds_a", "trials": 20 * K},
        {"model": "m", "cell": FACET, "dataset": "ds_b", "trials": 20 * K},
        {"model": "m", "cell": f"same_ordering:{FACET}", "dataset": "ds_a", "trials": 8},
    ]
    assert promoted["trials_per_model"] == {"acme/other": 5 * K, "m": 40 * K + 8}
    assert promoted["trials"] == count(to) == 45 * K + 8
    assert promoted["models"] == ["acme/other", "m"]
    assert out == (
        f"promoted run 20260101T000000Z-two ({run / 'trials.sqlite'}) to {to / 'trials.sqlite'}: "
        f"2 models with trials (acme/other: {5 * K} trials, m: {40 * K + 8} trials), 4 cells, "
        f"{45 * K + 8} trials\n"
    )


def test_promote_picks_the_run_that_started_last_not_the_last_name(runs, capsys):
    """``archive`` sorts after every timestamped run id, but the run in it started earlier (its
    store records run id 2025...); a store that records no start time is not a candidate."""
    root, _ = runs
    make_run(root, "archive", meta={"run_id": "20250601T000000Z-arch"})
    make_run(root, "zz-copied", meta={"run_id": "copied"})  # no recorded start
    newest = make_run(root, "20260102T000000Z-new", items=range(10))
    make_run(root, "20260101T000000Z-old")
    to = root.parent / "baseline"
    code, out, err = promote(capsys, "--runs-dir", root, "--to", to)
    assert code == 0, err
    assert "promoted run 20260102T000000Z-new" in out and count(to) == count(newest) == 10 * K


def test_promote_never_overwrites_a_run_or_a_foreign_folder(runs, capsys):
    """``--to`` naming an older run's folder (its trials store, no PROMOTED.json) or a folder of
    other files is refused with one line; nothing in it changes. An existing baseline folder is
    replaced as before."""
    root, _ = runs
    older = make_run(root, "20260101T000000Z-old")
    newer = make_run(root, "20260102T000000Z-new", items=range(30))
    before = (older / "trials.sqlite").read_bytes()
    code, out, err = promote(capsys, newer, "--to", older)
    assert_clean_error(code, out, err, f"option --to {str(older)!r}", "a run's trials store")
    assert (older / "trials.sqlite").read_bytes() == before and count(older) == 20 * K
    notes = root.parent / "mine"
    notes.mkdir()
    (notes / "notes.md").write_text("keep\n")
    code, out, err = promote(capsys, newer, "--to", notes)
    assert_clean_error(code, out, err, "notes.md", "not a baseline folder")
    assert [p.name for p in notes.iterdir()] == ["notes.md"]
    to = root.parent / "baseline"
    assert promote(capsys, older, "--to", to)[0] == 0
    assert promote(capsys, newer, "--to", to)[0] == 0 and count(to) == 30 * K


def test_promote_disk_error_names_the_option(runs, capsys):
    root, _ = runs
    run = make_run(root, "20260101T000000Z-old")
    blocker = root.parent / "a-file"
    blocker.write_text("x\n")
    code, out, err = promote(capsys, run, "--to", blocker / "baseline")
    assert_clean_error(code, out, err, "--to", f"{blocker} is a file, not a directory")
    assert "[Errno" not in err.split("(")[0]


def test_compare_refuses_one_run_on_both_sides(runs, capsys):
    root, thresholds = runs
    run = make_run(root, "20260101T000000Z-one")
    for base in (run, run / "trials.sqlite"):
        code, out, err = compare(capsys, base, run, "--thresholds", thresholds)
        assert_clean_error(code, out, err, "are the same run 20260101T000000Z-one")


def test_compare_notes_the_pairing_of_a_roster_the_baseline_lacks(runs, capsys):
    """Two candidate models against a one-model baseline run: both are compared with its only
    model, and the output says so (markdown and JSON)."""
    root, thresholds = runs
    base = make_run(root, "20260101T000000Z-base", model="m")
    cand = make_run(root, "20260102T000000Z-cand", model="a")
    make_run(root, "20260102T000000Z-cand", model="b")  # same store: a two-model roster
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds)
    assert code == 0, err
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: a has no counterpart in baseline run 20260101T000000Z-base (no model 'a'): "
        "compared with m, that run's only model",
        "note: b has no counterpart in baseline run 20260101T000000Z-base (no model 'b'): "
        "compared with m, that run's only model",
        "note: m@20260101T000000Z-base is the baseline of 2 candidate models: a, b",
    ]
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds, "--format", "json")
    assert len(json.loads(out)["notes"]) == 3 and err.count("note: ") == 3
    same = make_run(root, "20260103T000000Z-same", model="m")
    code, out, _ = compare(capsys, base, same, "--thresholds", thresholds)
    assert "note:" not in out  # its own id in the baseline: nothing to note


@pytest.mark.parametrize("case", ["no-runs-dir", "empty-runs-dir", "missing-run", "corrupt-run"])
def test_promote_bad_input_exits_4(runs, capsys, case):
    root, _ = runs
    to = root.parent / "baseline"
    args = ["--runs-dir", root, "--to", to]
    if case == "empty-runs-dir":
        (root / "20260101T000000Z-x").mkdir(parents=True)
    elif case == "missing-run":
        args = [root / "ghost", *args]
    elif case == "corrupt-run":
        (root / "bad").mkdir(parents=True)
        (root / "bad" / "trials.sqlite").write_bytes(b"\x00garbage" * 200)
        args = [root / "bad", *args]
    code, out, err = promote(capsys, *args)
    assert_clean_error(code, out, err, "no run to promote" if "runs-dir" in case else "run ")
    assert not to.exists()


# ------------------------------------------------------------------------------------ scripts/audit


@pytest.fixture
def audit_sandbox(tmp_path):
    """A copy of scripts/audit beside a stub Makefile (setup and report do nothing) and a stub
    python that records its arguments and exits with $STUB_STATUS: the script's own logic, no
    audit."""
    if shutil.which("make") is None or shutil.which("bash") is None:
        pytest.skip("needs make and bash")
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "audit", tmp_path / "scripts" / "audit")
    (tmp_path / "Makefile").write_text("setup:\n\t@true\nreport:\n\t@true\n")
    python = tmp_path / "stubenv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        textwrap.dedent("""\
        #!/usr/bin/env bash
        printf '%s\\n' "$@" > "$(dirname "$0")/../args"
        exit "${STUB_STATUS:-0}"
        """)
    )
    python.chmod(0o755)

    def run(*args: str, status: int = 0) -> tuple[int, list[str], str]:
        env = {**os.environ, "VENV": "stubenv", "STUB_STATUS": str(status)}
        proc = subprocess.run(
            ["bash", str(tmp_path / "scripts" / "audit"), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        return (
            proc.returncode,
            (tmp_path / "stubenv" / "args").read_text().splitlines(),
            proc.stderr,
        )

    return tmp_path, run


def test_audit_script_leaves_the_promoted_baseline_to_the_plugin(audit_sandbox):
    """scripts/audit passes its arguments through: the plugin itself compares with a promoted
    baseline (flipgate.regression.suite.baseline_run), so a bare pytest does the same."""
    root, run = audit_sandbox
    (root / "reports" / "baseline").mkdir(parents=True)
    (root / "reports" / "baseline" / "trials.sqlite").write_bytes(b"")
    code, args, err = run("-k", "arc", "--baseline-partial", status=1)
    assert code == 1
    assert args == [
        "-m",
        "pytest",
        "suites",
        "-n",
        "auto",
        "--alluredir",
        "reports/allure-results",
        "-k",
        "arc",
        "--baseline-partial",
    ]
    for own in (["--baseline", "reports/runs/x"], ["--baseline=reports/runs/x"]):
        code, args, err = run(*own, status=4)
        assert code == 4 and args[-len(own) :] == own


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_audit_script_passes_a_signal_on_to_pytest_and_exits_with_its_status(audit_sandbox, sig):
    """SIGTERM (a CI runner cancelling) or SIGINT sent to scripts/audit alone reaches pytest once,
    which stops and exits 2 (INTERRUPTED); the script exits with that status, not 143, and does
    not leave pytest running."""
    root, _ = audit_sandbox
    python = root / "stubenv" / "bin" / "python"
    python.write_text(
        textwrap.dedent("""\
        #!/usr/bin/env bash
        trap 'echo "stub got $1" >> "$(dirname "$0")/../signals"; exit 2' TERM
        trap 'echo "stub got INT" >> "$(dirname "$0")/../signals"; exit 2' INT
        touch "$(dirname "$0")/../started"
        for _ in $(seq 300); do sleep 0.1; done
        exit 0
        """).replace("$1", "TERM")
    )
    env = {**os.environ, "VENV": "stubenv"}
    proc = subprocess.Popen(
        ["bash", str(root / "scripts" / "audit")], env=env, cwd=root, start_new_session=True
    )
    deadline = time.monotonic() + 20
    while not (root / "stubenv" / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    assert proc.wait(timeout=20) == 2
    name = "TERM" if sig == signal.SIGTERM else "INT"
    assert (root / "stubenv" / "signals").read_text().splitlines() == [f"stub got {name}"]


def test_a_control_with_a_floor_not_measured_is_not_compared(runs, capsys):
    """Δ_order's delta between two runs whose controls were copies (a greedy hf backend: the
    floor recorded as 0 by construction) compares nothing: the control cell is listed among the
    skipped, not applicable, and never gated; the facet cell is compared as before."""
    from flipgate.backends.floor import NOT_MEASURED_FLOOR
    from flipgate.results import CellSummary

    root, thresholds = runs
    (thresholds / "default.yaml").write_text(
        THRESHOLDS
        + "  - {metric: delta_delta_order, vs: baseline, facet: same_ordering, max: 0.05,"
        " rule: lower}\n"
    )
    base = make_run(root, "20260101T000000Z-base", control=True, close=False)
    cand = make_run(root, "20260102T000000Z-cand", control=True)
    store = TrialStore(base / "trials.sqlite")
    copies = CellSummary(
        metrics={},
        n_items=20,
        n_items_insufficient=0,
        k=K,
        n_trials=20 * K,
        floor=NOT_MEASURED_FLOOR,
    )
    store.add_summaries("m", "ds_a", f"same_ordering:{FACET}", {"regex": copies})
    store.conn.close()
    assert RunRecord.open(base).floor_not_measured("m", f"same_ordering:{FACET}", "ds_a")
    assert not RunRecord.open(cand).floor_not_measured("m", f"same_ordering:{FACET}", "ds_a")
    code, out, err = compare(capsys, base, cand, "--thresholds", thresholds, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    assert [c["cell"] for c in result["comparisons"]] == [FACET]
    (skipped,) = result["skipped"]
    assert skipped["cell"] == f"same_ordering:{FACET}"
    assert skipped["reason"].startswith("not applicable: the floor of m@20260101T000000Z-base is")
    assert NOT_MEASURED_FLOOR in skipped["reason"]
    # not applicable is not "unchecked": no --allow-ungated needed, and the line says so
    assert "1 cell compared, 1 skipped (1 not applicable), 0 regressions" in err
