"""No gate passes by accident (docs/thresholds.md, "Nothing gated"): a cell no threshold can fail,
a declared cell that was skipped, a model that selects no cell or whose every cell was skipped, a
regression with nothing to compare, a `compare` missing cells and a baseline promoted from an
unfinished run each end in a usage error with a line saying what was not checked, unless the user
opts out (``--allow-ungated``); a worker that died mid-cell is an interruption."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from support.gating import GATING, one_model
from support.paths import write
from support.regression_runs import THRESHOLDS, make_run
from support.suite_runs import models_yaml, run_suite

from flipgate.__main__ import main
from flipgate.exitcodes import GATE_FAILED, GATE_PASSED, INTERRUPTED, USAGE_ERROR
from flipgate.gate.ledger import MODELS_PROPERTY, GateLedger
from flipgate.outcomes import OUTCOME_PROPERTY, Outcome
from flipgate.suite.cell_loop import NOT_APPLICABLE, NOTHING_GATED, UNGATED

# ------------------------------------------------------------------------------ the ledger, alone


def report(
    outcome: str,
    when: str = "call",
    reason: str = "",
    models=("m",),
    typed: Outcome | None = None,
    **extra,
):
    longrepr = ("f.py", 1, f"Skipped: {reason}") if outcome == "skipped" else (reason or None)
    typed_as = [(OUTCOME_PROPERTY, typed.value)] if typed is not None else []
    rep = pytest.TestReport(
        nodeid=f"suites/x.py::test[{len(reason)}-{outcome}-{when}]",
        location=("suites/x.py", 1, "test"),
        keywords={"flipgate_cell": 1},
        outcome=outcome,  # type: ignore[arg-type]
        longrepr=longrepr,
        when=when,  # type: ignore[arg-type]
        user_properties=[(MODELS_PROPERTY, list(models)), *typed_as],
    )
    for key, value in extra.items():
        setattr(rep, key, value)
    return rep


class FakeSession:
    def __init__(self, status: int):
        self.exitstatus = status


def settle(ledger: GateLedger, status: int) -> int:
    session = FakeSession(status)
    ledger.pytest_sessionfinish(session)  # type: ignore[arg-type]
    return session.exitstatus


def test_ledger_counts_each_kind_of_cell():
    ledger = GateLedger()
    for rep in (
        report("passed"),
        report("failed", reason="threshold(s) violated: ..."),
        report("skipped", reason="inconclusive", wasxfail="inconclusive threshold"),
        report("failed", reason=NOTHING_GATED + "no threshold ...", typed=Outcome.NOTHING_GATED),
        report("skipped", "setup", NOT_APPLICABLE + "no images", typed=Outcome.NOT_APPLICABLE),
        report("skipped", "call", "baseline run r has no cell: nothing to compare with"),
        report("failed", reason="flipgate: data/x.jsonl: row 3: ...", typed=Outcome.BAD_INPUT),
        # the ledger reads the type, not the message: an untyped look-alike is what it is
        report("skipped", "call", NOT_APPLICABLE + "a suite's own skip reason"),
        report("failed", reason="flipgate: a threshold's own message"),
        report("passed", "setup"),  # not a cell's last word
        report("passed", "teardown"),
    ):
        ledger.pytest_runtest_logreport(rep)
    assert dict(ledger.outcomes) == {
        "gated": 4,
        "ungated": 1,
        "not applicable": 1,
        "skipped": 2,
        "error": 1,
    }
    lines = ledger.summary_lines()
    assert lines[0] == ("flipgate: cells: 4 gated, 1 ungated, 2 skipped, 1 not applicable, 1 error")
    assert any("nothing to compare with" in line for line in lines)


def test_a_skipped_cell_withholds_gate_passed_unless_allowed():
    for allow, expected in ((False, USAGE_ERROR), (True, GATE_PASSED)):
        ledger = GateLedger(allow_ungated=allow)
        ledger.pytest_runtest_logreport(report("passed"))
        ledger.pytest_runtest_logreport(report("skipped", reason="nothing to compare with"))
        assert settle(ledger, GATE_PASSED) == expected
    # a failed gate stays a failed gate
    ledger = GateLedger()
    ledger.pytest_runtest_logreport(report("skipped", reason="nothing to compare with"))
    assert settle(ledger, GATE_FAILED) == GATE_FAILED


def test_not_applicable_cells_pass_only_beside_a_gated_cell_of_the_model():
    ledger = GateLedger()
    ledger.pytest_runtest_logreport(report("passed", models=("a",)))
    ledger.pytest_runtest_logreport(
        report("skipped", reason="x", models=("a",), typed=Outcome.NOT_APPLICABLE)
    )
    assert settle(ledger, GATE_PASSED) == GATE_PASSED
    ledger.pytest_runtest_logreport(
        report("skipped", reason="y", models=("b",), typed=Outcome.NOT_APPLICABLE)
    )
    assert settle(ledger, GATE_PASSED) == USAGE_ERROR
    assert "model 'b': none of its 1 cells was gated" in "\n".join(ledger.summary_lines())


def test_ungated_cells_under_the_opt_out_are_counted_not_hidden():
    ledger = GateLedger(allow_ungated=True)
    ledger.pytest_runtest_logreport(report("passed"))
    ledger.pytest_runtest_logreport(
        report("skipped", reason=UNGATED + "no threshold", typed=Outcome.UNGATED)
    )
    assert settle(ledger, GATE_PASSED) == GATE_PASSED
    assert ledger.summary_lines()[0] == "flipgate: cells: 1 gated, 1 ungated"


def test_a_worker_crash_is_an_interruption_not_a_failed_gate():
    ledger = GateLedger()
    crash = pytest.TestReport(
        nodeid="suites/x.py::test[m]",
        location=("suites/x.py", None, "suites/x.py"),
        keywords={},
        outcome="failed",
        longrepr="worker 'gw0' crashed while running 'suites/x.py::test[m]'",
        when="???",  # type: ignore[arg-type]
    )
    ledger.pytest_runtest_logreport(report("passed"))
    ledger.pytest_runtest_logreport(crash)
    assert settle(ledger, GATE_FAILED) == INTERRUPTED
    assert "worker crashed while running suites/x.py::test[m]" in "\n".join(ledger.summary_lines())


# ----------------------------------------------------------------------- the real suites, run


def audit(tmp: Path, models: str, thresholds: str, *args: str, facets: str | None = None):
    path = models_yaml(tmp / "models.yaml", models, "[arc_challenge]")
    if facets is not None:
        text = path.read_text().replace("option_order: {datasets: [arc_challenge]}", facets)
        path.write_text(text)
    th = write(tmp / "thresholds" / "default.yaml", thresholds).parent
    proc = run_suite(tmp, path, th, "--items-per-dataset", "2", *args)
    return proc, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "thresholds, allow, status",
    [
        ("thresholds: []\n", False, USAGE_ERROR),
        ("thresholds:\n  - {metric: flip_rate, max: 0.25, rule: warn}\n", False, USAGE_ERROR),
        ("thresholds:\n  - {metric: flip_rate, max: 0.25, rule: warn}\n", True, GATE_PASSED),
    ],
    ids=["no-thresholds", "warn-only", "warn-only-allowed"],
)
@pytest.mark.slow
def test_cells_no_threshold_can_fail_are_not_passes(
    tiny_model_dir, tmp_path, thresholds, allow, status
):
    args = ("--allow-ungated",) if allow else ()
    proc, out = audit(tmp_path, one_model(tiny_model_dir), thresholds, *args)
    assert proc.returncode == status, out[-3000:]
    assert "Traceback" not in out
    if allow:
        # the control of a greedy local model is not applicable (floor 0 by construction)
        assert "flipgate: cells: 0 gated, 1 ungated, 1 not applicable" in out, out[-3000:]
    else:
        assert NOTHING_GATED in out and "--allow-ungated" in out, out[-3000:]
    # the measurements are kept either way: the cards were written
    assert list((tmp_path / "cards" / "tiny").glob("*.json")), out[-3000:]


@pytest.mark.slow
def test_typed_outcomes_reach_the_controller_from_xdist_workers(tiny_model_dir, tmp_path):
    """The ledger reads a cell's typed outcome (flipgate.outcomes), not its message: under
    xdist the outcome travels with the worker's report to the controller."""
    warn_only = "thresholds:\n  - {metric: flip_rate, max: 0.25, rule: warn}\n"
    args = ("--allow-ungated", "-n", "2")
    proc, out = audit(tmp_path, one_model(tiny_model_dir), warn_only, *args)
    assert proc.returncode == GATE_PASSED, out[-3000:]
    assert "flipgate: cells: 0 gated, 1 ungated, 1 not applicable" in out, out[-3000:]


@pytest.mark.slow
def test_a_text_only_model_whose_every_cell_needs_images_is_not_a_pass(tiny_model_dir, tmp_path):
    proc, out = audit(
        tmp_path,
        one_model(tiny_model_dir),
        GATING,
        facets="image_set_order: {datasets: [synthetic_shapes]}",
    )
    assert proc.returncode == USAGE_ERROR, out[-3000:]
    assert "not applicable" in out
    assert "model 'tiny': none of its 2 cells was gated" in out, out[-3000:]


@pytest.mark.slow
def test_a_model_that_selects_no_cell_is_a_collection_error(tiny_model_dir, tmp_path):
    """Each selector names a declared facet or dataset, but together they select nothing."""
    selection = ", suites: [order], facets: [option_order], datasets: [synthetic_multihop]"
    models = one_model(tiny_model_dir, selection) + one_model(tiny_model_dir).replace(
        "id: tiny", "id: tiny2"
    )
    facets = (
        "option_order: {datasets: [arc_challenge]}\n"
        "    evidence_chunk_order: {datasets: [synthetic_multihop]}"
    )
    proc, out = audit(tmp_path, models, GATING, "--collect-only", facets=facets)
    assert proc.returncode == USAGE_ERROR, out[-3000:]
    assert "field models[0] (id 'tiny')" in out and "select no cell" in out, out[-3000:]
    assert "Traceback" not in out


@pytest.mark.slow
def test_a_baseline_with_nothing_to_compare_is_not_a_pass(tiny_model_dir, tmp_path):
    first, out = audit(tmp_path / "a", one_model(tiny_model_dir), GATING)
    assert first.returncode == GATE_PASSED, out[-3000:]
    baseline = next((tmp_path / "a" / "runs").iterdir())
    regression = GATING + "  - {metric: delta_flip_rate, vs: baseline, max: 1.0, rule: point}\n"
    proc, out = audit(
        tmp_path / "b",
        one_model(tiny_model_dir),
        regression,
        "--baseline",
        str(baseline),
        facets="option_order: {datasets: [commonsense_qa]}",
    )
    assert proc.returncode == USAGE_ERROR, out[-3000:]
    assert "nothing to compare with" in out and "declared cell not run" in out, out[-3000:]


CRASH_PLUGIN = """
import os

def pytest_runtest_call(item):
    if os.environ.get("PYTEST_XDIST_WORKER") and "same_ordering" not in item.nodeid:
        os._exit(9)
"""


@pytest.mark.slow
def test_a_worker_killed_mid_cell_is_interrupted_not_failed(tiny_model_dir, tmp_path, monkeypatch):
    write(tmp_path / "plugins" / "crash_cell.py", CRASH_PLUGIN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "plugins"))
    proc, out = audit(
        tmp_path,
        one_model(tiny_model_dir),
        GATING,
        "-n",
        "1",
        "-p",
        "crash_cell",
        "--max-worker-restart",
        "0",
    )
    assert proc.returncode == INTERRUPTED, out[-3000:]
    assert "worker crashed while running" in out, out[-3000:]


# ------------------------------------------------------------------- compare and baseline commands
@pytest.fixture
def thresholds_dir(tmp_path) -> Path:
    return write(tmp_path / "thresholds" / "default.yaml", THRESHOLDS).parent


def test_compare_names_the_cells_the_candidate_lacks(tmp_path, thresholds_dir, capsys):
    base = make_run(tmp_path / "runs", "20260101T000000Z-aaaaaa", datasets=("ds_a", "ds_b"))
    cand = make_run(tmp_path / "runs", "20260102T000000Z-bbbbbb", datasets=("ds_a",))
    args = ["compare", str(base), str(cand), "--thresholds", str(thresholds_dir)]
    assert main(args) == USAGE_ERROR
    out = capsys.readouterr()
    assert "option_order × ds_b" in out.out and "not compared (not a pass)" in out.out
    assert "1 cell compared, 1 skipped" in out.out
    assert "not everything was checked" in out.err
    assert main([*args, "--allow-ungated"]) == 0


def test_compare_with_no_applicable_threshold_is_not_a_pass(tmp_path, capsys):
    base = make_run(tmp_path / "runs", "20260101T000000Z-aaaaaa")
    cand = make_run(tmp_path / "runs", "20260102T000000Z-bbbbbb")
    empty = write(tmp_path / "empty" / "default.yaml", "thresholds: []\n").parent
    assert main(["compare", str(base), str(cand), "--thresholds", str(empty)]) == USAGE_ERROR
    assert "nothing gated" in capsys.readouterr().out


@pytest.mark.parametrize(
    "meta, why",
    [
        ({"finished": None}, "has not finished"),
        ({"exit_status": 2}, "exit status 2 (interrupted)"),
        ({"exit_status": 5}, "exit status 5"),
    ],
    ids=["unfinished", "interrupted", "nothing-collected"],
)
def test_promote_refuses_an_unfinished_or_interrupted_run(tmp_path, capsys, meta, why):
    run = make_run(tmp_path / "runs", "20260101T000000Z-aaaaaa", meta=meta)
    if meta.get("finished", "") is None:  # a run still going (or killed) has no end recorded
        import sqlite3

        conn = sqlite3.connect(run / "trials.sqlite")
        conn.execute("DELETE FROM meta WHERE key = 'finished'")
        conn.commit()
        conn.close()
    status = main(["baseline", str(run), "--to", str(tmp_path / "baseline")])
    err = capsys.readouterr().err
    assert status == USAGE_ERROR and why in err and "not promoted" in err, err
    assert not (tmp_path / "baseline" / "trials.sqlite").exists()


def test_promote_refuses_a_run_with_no_trials(tmp_path, capsys):
    run = make_run(tmp_path / "runs", "20260101T000000Z-aaaaaa", items=())
    assert main(["baseline", str(run), "--to", str(tmp_path / "baseline")]) == USAGE_ERROR
    assert "0 trials" in capsys.readouterr().err


@pytest.mark.slow
def test_the_finished_run_records_its_end(tiny_model_dir, tmp_path):
    proc, out = audit(tmp_path, one_model(tiny_model_dir), GATING)
    assert proc.returncode == GATE_PASSED, out[-3000:]
    from flipgate.store import TrialStore

    run = next((tmp_path / "runs").iterdir())
    meta = TrialStore.read_only(run / "trials.sqlite").meta()
    assert meta["exit_status"] == 0 and meta["finished"], json.dumps(meta)
    assert "flipgate: cells: 1 gated, 1 not applicable" in out, textwrap.shorten(out, 3000)


# ------------------------------------------------------------ no proof from a handful of items
def test_wilson_interval_matches_hand_computed_values():
    from flipgate.metrics.proportion import wilson_interval

    # z = 1.959964: n = 1, p = 0 -> (0, z²/(1+z²)) = (0, 0.7934); n = 25, p = 0 -> upper 0.1332
    assert wilson_interval(0.0, 1, 0.95) == pytest.approx((0.0, 0.79345), abs=1e-4)
    assert wilson_interval(0.0, 25, 0.95)[1] == pytest.approx(0.13319, abs=1e-4)
    # p = 0.5, n = 100: 0.5 ± 0.0971 (the textbook value)
    lo, hi = wilson_interval(0.5, 100, 0.95)
    assert (lo, hi) == pytest.approx((0.4038, 0.5962), abs=1e-4)


def verdict_on(values, rule: str, bound: float, direction: str = "max", cluster=None):
    from flipgate.gate.rules import evaluate
    from flipgate.summary import mean_estimate

    m = mean_estimate(values, 500, 0.95, 0, cluster)
    kw = {direction: bound}
    threshold = _threshold("flip_rate", rule, **kw)
    [v] = evaluate([threshold], {"regex": {"flip_rate": m}}, "regex")
    return m, v


def _threshold(metric: str, rule: str, **bound):
    import tempfile

    from flipgate.config import parse_thresholds

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "default.yaml"
        ((key, value),) = bound.items()
        path.write_text(f"thresholds:\n  - {{metric: {metric}, {key}: {value}, rule: {rule}}}\n")
        [t], _ = parse_thresholds(path)
    return t


@pytest.mark.parametrize("n", [1, 2, 5])
def test_conformance_is_never_proven_from_a_handful_of_items(n):
    """Planted: n items, none flipped. The percentile bootstrap says [0, 0]; the gate's interval
    reaches past 0.25 below 13 items, so ``rule: upper`` cannot pass."""
    m, v = verdict_on([0.0] * n, "upper", 0.25)
    assert m.ci == (0.0, 0.0)  # the card's bootstrap interval, unchanged
    assert v.ci is not None and v.ci[1] > 0.25
    assert v.verdict == "inconclusive" and v.outcome == "fail"


def test_enough_items_still_prove_conformance():
    m, v = verdict_on([0.0] * 30, "upper", 0.25)
    assert v.verdict == "pass" and v.ci is not None and v.ci[1] == pytest.approx(0.1135, abs=1e-3)


def test_a_clustered_mean_counts_items_not_trials():
    """parse rate over 6 trials of one item is one item's worth of evidence."""
    _, v = verdict_on([1.0] * 6, "upper", 0.9, "min", cluster=["i1"] * 6)
    assert v.verdict == "inconclusive" and v.ci is not None and v.ci[0] < 0.3
