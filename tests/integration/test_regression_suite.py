"""suites/regression as a user runs it: an in-run pair (models.yaml ``baseline:``), a baseline run
(``--baseline PATH``), incomparable manifests, and bad baseline input as one clean line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.paths import write
from support.suite_runs import models_yaml, run_suite

from flipgate.exitcodes import GATE_FAILED, USAGE_ERROR
from flipgate.regression.runs import RunRecord
from flipgate.store import TrialStore

#: every test here runs audits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow

REGRESSION = """
level: 0.95
thresholds:
  - {metric: parse_rate, min: 0.0, rule: point}
  - {metric: flip_rate, max: 1.0, rule: lower}
  - {metric: flip_rate, facet: same_ordering, max: 1.0, rule: upper}
  - {metric: delta_flip_rate, vs: baseline, max: 0.5, rule: lower}
  - {metric: delta_accuracy, vs: baseline, min: -0.5, rule: lower}
  - {metric: delta_delta_order, vs: baseline, facet: same_ordering, max: 0.5, rule: lower}
"""
ORDER_AND_REGRESSION = ("-k", "option_order or regression")


def _runs(tmp: Path) -> list[Path]:
    """The runs in the order they started: a run id begins with its UTC start time, as
    ``flipgate baseline`` orders them (a folder's mtime moves whenever its store is opened)."""
    return sorted((tmp / "runs").iterdir(), key=lambda p: p.name)


@pytest.fixture(scope="module")
def pair_run(tiny_model_dir, tmp_path_factory):
    """tiny-bf16 (candidate) against tiny-fp32 (its baseline) in one run."""
    tmp = tmp_path_factory.mktemp("pair")
    models = models_yaml(
        tmp / "models.yaml",
        f"""
  - {{id: tiny-fp32, backend: hf, source: {{path: "{tiny_model_dir}"}}, max_new_tokens: 3,
     suites: [order]}}
  - {{id: tiny-bf16, backend: hf, source: {{path: "{tiny_model_dir}"}}, dtype: bfloat16,
     max_new_tokens: 3, suites: [order], datasets: [arc_challenge], baseline: tiny-fp32}}
""",
    )
    thresholds = write(tmp / "thresholds" / "default.yaml", REGRESSION).parent
    proc = run_suite(tmp, models, thresholds, *ORDER_AND_REGRESSION, "-rA")
    return tmp, models, thresholds, proc


def test_in_run_pair_compares_every_shared_cell(pair_run):
    tmp, _, _, proc = pair_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    passed = [
        line
        for line in proc.stdout.splitlines()
        if line.startswith("PASSED") and "test_regression" in line
    ]
    # the candidate's datasets: restricts it to arc_challenge: option_order and its control;
    # the control case is not applicable: both greedy hf models copy their replicates, so
    # neither floor was measured (docs/definitions.md §12.5) and Δ_order's delta is not compared
    assert len(passed) == 1, proc.stdout[-3000:]
    assert all("tiny-bf16-vs-tiny-fp32" in line and "arc_challenge" in line for line in passed)
    (skipped,) = [
        line
        for line in proc.stdout.splitlines()
        if line.startswith("SKIPPED") and "same_ordering:option_order vs tiny-fp32" in line
    ]
    assert "not applicable" in skipped and "floor 0 by construction" in skipped
    store = TrialStore(_runs(tmp)[-1] / "trials.sqlite")
    comparisons = store.comparisons("tiny-bf16")
    assert {c["cell"] for c in comparisons} == {"option_order"}
    facet = next(c for c in comparisons if c["cell"] == "option_order")
    assert facet["baseline"] == "tiny-fp32" and facet["overlap"]["shared_items"] == 3
    assert (
        facet["baseline_identity"]["weights_sha256"]
        and facet["baseline_identity"]["run_id"] == _runs(tmp)[-1].name
    )
    deltas = facet["readouts"][facet["primary_readout"]]["deltas"]
    assert {"delta_flip_rate", "delta_accuracy", "delta_parse_rate"} <= set(deltas)
    verdicts = [v for m, d, v in store.all_verdicts() if "vs" in (v.facet or "")]
    assert {v.metric for v in verdicts} == {"delta_flip_rate", "delta_accuracy"}
    assert store.meta()["grammar_version"] and store.meta()["seed"] == 42


def test_baseline_run_gates_and_regression_fails(pair_run):
    """Across runs: every model against its previous run. Each is the same model (one fingerprint)
    with cache-identical answers, so no case compares it with itself: each says "not compared"
    (not a pass) and records no comparison. Then a margin no model can meet fails the gate with
    exit status 1 on the in-run pair, whose two versions differ (float32 vs bfloat16)."""
    tmp, models, thresholds, _ = pair_run
    baseline = _runs(tmp)[-1]
    proc = run_suite(
        tmp, models, thresholds, *ORDER_AND_REGRESSION, "--baseline", str(baseline), "-rA"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    not_compared = [
        line
        for line in proc.stdout.splitlines()
        if line.startswith("SKIPPED") and "not compared: tiny-" in line
    ]
    assert {m for m in ("tiny-fp32", "tiny-bf16") for line in not_compared if f"{m}@" in line} or (
        len(not_compared) >= 2
    ), proc.stdout[-3000:]
    assert all("identical answers on all" in line for line in not_compared)
    store = TrialStore(_runs(tmp)[-1] / "trials.sqlite")
    assert not [c for c in store.comparisons() if "@" in c["baseline"]]
    assert {c["candidate"] for c in store.comparisons()} == {"tiny-bf16"}  # the in-run pair
    strict = write(
        tmp / "strict" / "default.yaml",
        "thresholds:\n  - {metric: delta_parse_rate, vs: baseline, min: 0.5, rule: point}\n"
        "  - {metric: delta_delta_order, vs: baseline, facet: same_ordering, max: 1,"
        " rule: point}\n",
    ).parent
    proc = run_suite(tmp, models, strict, "-k", "regression and tiny-bf16-vs-tiny-fp32")
    assert proc.returncode == GATE_FAILED, proc.stdout[-3000:]
    assert (
        "delta_parse_rate[vs=baseline] >= 0.5 (point)" in proc.stdout and "-> fail" in proc.stdout
    )


def test_incomparable_manifests_are_an_error_unless_partial(pair_run):
    """Sequential cells (the default) drawn to other caps compare the prefix both runs drew;
    fixed-N cells must answer the same manifest, unless --baseline-partial."""
    tmp, models, thresholds, _ = pair_run
    one = ("-k", "regression and tiny-fp32-vs-tiny-fp32 and not same")
    proc = run_suite(
        tmp, models, thresholds, *one, "--baseline", str(_runs(tmp)[0]), "--items-per-dataset", "2"
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    overlap = TrialStore(_runs(tmp)[-1] / "trials.sqlite").comparisons("tiny-fp32")[0]["overlap"]
    assert overlap["prefix"] and not overlap["partial"]
    assert (overlap["baseline_items"], overlap["candidate_items"], overlap["shared_items"]) == (
        3,
        2,
        2,
    )
    proc = run_suite(tmp, models, thresholds, "-k", "tiny-fp32 and option_order", "--fixed-n")
    assert proc.returncode == 0, proc.stdout[-3000:]
    fixed = ("--baseline", str(_runs(tmp)[-1]), "--items-per-dataset", "2", "--fixed-n")
    proc = run_suite(tmp, models, thresholds, *one, *fixed)
    assert proc.returncode == USAGE_ERROR, proc.stdout[-3000:]
    assert (
        "did not answer the same manifest" in proc.stdout
        and "items 3 vs 2 (2 shared)" in proc.stdout
    )
    proc = run_suite(tmp, models, thresholds, *one, *fixed, "--baseline-partial")
    assert proc.returncode == 0, proc.stdout[-3000:]
    overlap = TrialStore(_runs(tmp)[-1] / "trials.sqlite").comparisons("tiny-fp32")[0]["overlap"]
    assert overlap["partial"] and (overlap["baseline_items"], overlap["candidate_items"]) == (3, 2)
    assert "prefix" not in overlap


def _foreign_sqlite(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE trials (id INTEGER)")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    "case", ["missing", "not-sqlite", "foreign", "grammar", "seed", "candidate"]
)
def test_bad_baseline_is_one_clean_line_and_writes_nothing(pair_run, tmp_path, case):
    tmp, models, thresholds, _ = pair_run
    baseline = _runs(tmp)[0] / "trials.sqlite"
    extra = ()
    if case == "missing":
        baseline, expected = tmp_path / "nope", "no such run directory or trials store"
    elif case == "not-sqlite":
        baseline, expected = (
            write(tmp_path / "trials.sqlite", "not a database " * 100),
            "not a flipgate trials store",
        )
    elif case == "foreign":
        baseline, expected = (
            _foreign_sqlite(tmp_path / "trials.sqlite"),
            "table 'trials' lacks columns",
        )
    elif case in ("grammar", "seed"):
        copy = tmp_path / "run" / "trials.sqlite"
        copy.parent.mkdir()
        with sqlite3.connect(baseline) as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        TrialStore(copy).set_meta({"grammar_version": 1} if case == "grammar" else {"seed": 7})
        baseline, expected = copy, ("grammar version 1" if case == "grammar" else "with seed 7")
    else:
        extra, expected = ("--candidate", "tiny-nope"), "--candidate 'tiny-nope': not a model"
    out = tmp_path / "out"
    proc = run_suite(out, models, thresholds, "--baseline", str(baseline), *extra)
    text = proc.stdout + proc.stderr
    assert proc.returncode == USAGE_ERROR, text[-3000:]
    lines = [line for line in text.splitlines() if "flipgate: " in line]
    assert len(lines) == 1 and expected in lines[0], text[-3000:]
    assert "Traceback" not in text and not (out / "runs").exists() and not (out / "cards").exists()
    if case in ("grammar", "seed"):
        assert RunRecord.open(baseline).meta  # the baseline itself is untouched and still readable


def test_baseline_promotion_round_trip(pair_run, tmp_path):
    """`python -m flipgate baseline` promotes a run; the promoted copy is a valid --baseline."""
    import subprocess
    import sys

    tmp, _, _, _ = pair_run
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "flipgate",
            "baseline",
            "--runs-dir",
            str(tmp / "runs"),
            "--to",
            str(tmp_path / "baseline"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    record = RunRecord.open(tmp_path / "baseline")
    assert record.run_id == _runs(tmp)[-1].name and json.loads(
        (tmp_path / "baseline" / "PROMOTED.json").read_text()
    )
