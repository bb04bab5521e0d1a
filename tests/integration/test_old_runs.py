"""Old runs stay readable: a trials store written by an earlier flipgate (tests/golden/old_run, made
at commit e85625b; its README says how) still serves as a run's ``--baseline``, as either side of
``python -m flipgate compare``, as a run to promote, in a cell's trend, and through
``TrialStore.read_only``. The fixture is copied into tmp_path before use, and every reader must
leave the copy byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.paths import REPO, write
from support.suite_runs import models_yaml, run_suite

from flipgate import registry
from flipgate.__main__ import main
from flipgate.exitcodes import GATE_PASSED
from flipgate.grammar import GRAMMAR_VERSION
from flipgate.store import TrialStore

#: every test here runs audits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow

GOLDEN = REPO / "tests" / "golden" / "old_run" / "trials.sqlite"
OLD_RUN = "20261125T192147Z-4afd9d"
OLD_COMMIT = "e85625b549a4a283de14b7e55505947d856c2016"
#: sha256 of the tiny model's weights the old run recorded (tests/conftest.py, tiny_model_dir)
OLD_WEIGHTS = "21d5c0f1f9cd3479d3d23eae11ae758dc4d3129f8ed08d590b9513173e5f9094"
CELLS = ("option_order", "same_ordering:option_order")

# every cell of both runs gated, the regression cells included
THRESHOLDS = """
thresholds:
  - {metric: parse_rate, min: 0.0, rule: point}
  - {metric: flip_rate, max: 1.0, rule: point}
  - {metric: flip_rate, facet: same_ordering, max: 1.0, rule: point}
  - {metric: delta_flip_rate, vs: baseline, max: 1.0, rule: point}
  - {metric: delta_delta_order, facet: same_ordering, vs: baseline, max: 1.0, rule: point}
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def old_copy(root: Path) -> Path:
    """The golden store copied to ``root/runs/<its run id>/trials.sqlite``, as the run left it."""
    store = root / "runs" / OLD_RUN / "trials.sqlite"
    store.parent.mkdir(parents=True)
    shutil.copyfile(GOLDEN, store)
    return store


def untouched(store: Path) -> None:
    """Nothing was written into or beside the old store."""
    assert sha256(store) == sha256(GOLDEN)
    assert sorted(p.name for p in store.parent.iterdir()) == ["trials.sqlite"]


@pytest.fixture(scope="module")
def new_run(tiny_model_dir, tmp_path_factory) -> SimpleNamespace:
    """The current suites on the same tiny model and cells, with the old store as ``--baseline``
    and in the same runs directory (so each cell's trend reads it too)."""
    tmp = tmp_path_factory.mktemp("old-runs")
    old = old_copy(tmp)
    models = models_yaml(
        tmp / "models.yaml",
        f'  - {{id: tiny, backend: hf, source: {{path: "{tiny_model_dir}"}}, max_new_tokens: 3}}\n',
        "[arc_challenge]",
    )
    thresholds = write(tmp / "thresholds" / "default.yaml", THRESHOLDS).parent
    proc = run_suite(
        tmp, models, thresholds, "--items-per-dataset", "2", "--baseline", str(old), "-rA"
    )
    new = [p for p in (tmp / "runs").iterdir() if p.name != OLD_RUN]
    return SimpleNamespace(
        tmp=tmp,
        old=old,
        thresholds=thresholds,
        proc=proc,
        out=proc.stdout + proc.stderr,
        new=new[0] if len(new) == 1 else None,
    )


def test_a_run_pairs_every_cell_with_the_old_store_as_baseline(new_run):
    assert new_run.proc.returncode == GATE_PASSED, new_run.out[-3000:]
    assert "Traceback" not in new_run.out
    facet, control = (
        f"test_regression[tiny-vs-tiny@baseline-run-{cell.replace(':', '-')}-arc_challenge]"
        for cell in CELLS
    )
    # the facet's case ran and passed, not skipped
    assert f"PASSED suites/regression/test_regression.py::{facet}" in new_run.out, new_run.out
    # the control of the greedy local model answers its replicates as copies: the control and its
    # regression case are not applicable (docs/definitions.md §12.5), never a pass
    assert f"PASSED suites/regression/test_regression.py::{control}" not in new_run.out
    assert "not applicable: same_ordering:option_order vs tiny: floor 0 by construction" in (
        new_run.out
    )
    assert "2 passed" in new_run.out and "failed" not in new_run.out, new_run.out[-3000:]
    card = json.loads((new_run.tmp / "cards" / "tiny" / "arc_challenge.json").read_text())
    section = card["regression"]
    assert [c["cell"] for c in section["comparisons"]] == [CELLS[0]]
    for comparison in section["comparisons"]:
        assert comparison["baseline"] == f"tiny@{OLD_RUN}"
        assert comparison["overlap"]["shared_items"] == 2 and not comparison["overlap"]["partial"]
        identity = comparison["baseline_identity"]
        assert identity["run_id"] == OLD_RUN and identity["git_commit"] == OLD_COMMIT
        assert identity["weights_sha256"] == OLD_WEIGHTS
        assert [v["verdict"] for v in comparison["verdicts"]] == ["pass"]
    assert f"tiny@{OLD_RUN}" in (new_run.tmp / "cards" / "tiny" / "regression.md").read_text()
    untouched(new_run.old)


def test_the_new_run_measured_the_same_weights(new_run):
    """tests/conftest.py builds the tiny model the old run measured, byte for byte (same code,
    same seed): the two runs compare one model with itself."""
    assert new_run.new is not None, new_run.out[-3000:]
    store = TrialStore.read_only(new_run.new / "trials.sqlite")
    assert store.models()["tiny"]["fingerprint"]["weights_sha256"] == OLD_WEIGHTS


def test_compare_reads_the_old_store_on_either_side(new_run):
    assert new_run.new is not None, new_run.out[-3000:]
    th = str(new_run.thresholds)
    for base, cand, shown in [
        (new_run.old, new_run.new, f"baseline run {OLD_RUN}"),  # the store file / a run directory
        (new_run.new, new_run.old.parent, f"candidate run {OLD_RUN}"),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "flipgate", "compare", str(base), str(cand), "--thresholds", th],
            capture_output=True,
            text=True,
            timeout=120,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert "Traceback" not in out and shown in proc.stdout
        assert "| candidate vs baseline | cell | dataset | metric |" in proc.stdout
        # the new run's control is copies (floor 0 by construction): not applicable, not compared
        assert "1 cell compared, 1 skipped (1 not applicable), 0 regressions" in proc.stdout
    untouched(new_run.old)


def test_the_old_run_is_promoted_and_compared(new_run, tmp_path, capsys):
    baseline = tmp_path / "baseline"
    assert main(["baseline", str(new_run.old.parent), "--to", str(baseline)]) == 0
    assert f"promoted run {OLD_RUN}" in capsys.readouterr().out
    promoted = json.loads((baseline / "PROMOTED.json").read_text())
    assert promoted["git_commit"] == OLD_COMMIT and promoted["trials"] == 24
    args = ["compare", str(baseline), str(new_run.new), "--thresholds", str(new_run.thresholds)]
    assert main([*args, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline_run"]["run_id"] == OLD_RUN
    assert data["baseline_run"]["grammar_version"] == GRAMMAR_VERSION
    assert data["summary"]["compared"] == 1 and data["summary"]["skipped"] == 1
    assert data["summary"]["not_applicable"] == 1
    untouched(new_run.old)


def test_the_trend_of_a_cell_reads_the_old_run(new_run):
    from flipgate.trend import metric_trend

    assert new_run.new is not None, new_run.out[-3000:]
    for cell in CELLS:
        points = metric_trend(
            new_run.tmp / "runs", "tiny", "arc_challenge", cell, "letter_logprob", "flip_rate"
        )
        assert [p.run_id for p in points] == [OLD_RUN, new_run.new.name]
        assert points[0].n_items == 2 and points[0].estimate is not None


def test_trial_store_reads_the_old_store(tmp_path):
    from flipgate.cards import validate_card
    from flipgate.cards.build import build_card

    old = old_copy(tmp_path)
    store = TrialStore.read_only(old)
    meta = store.meta()
    assert meta["run_id"] == OLD_RUN and meta["git_commit"] == OLD_COMMIT
    assert meta["grammar_version"] == GRAMMAR_VERSION and meta["exit_status"] == 0
    assert (meta["seed"], meta["k"], meta["items_per_dataset"]) == (42, 6, 2)
    trials = store.trials()
    assert len(trials) == 24 and set(trials["facet"]) == set(CELLS)
    assert set(trials["model_id"]) == {"tiny"} and set(trials["dataset"]) == {"arc_challenge"}
    assert trials["permutation"].map(len).eq(4).all()  # JSON columns decoded
    assert all(isinstance(r, dict) for r in trials["readouts"])
    verdicts = store.verdicts("tiny", "arc_challenge")
    assert len(verdicts) == 3 and {v.verdict for v in verdicts} == {"pass"}
    assert len(store.all_verdicts()) == 3
    assert store.models()["tiny"]["fingerprint"]["weights_sha256"] == OLD_WEIGHTS
    assert list(store.manifests()) == [("option_order", "arc_challenge")]
    summaries = store.cell_summaries("tiny", "arc_challenge")
    assert set(summaries) == set(CELLS)
    assert set(summaries["option_order"]) == {"letter_logprob", "regex"}
    summary = store.summaries("tiny", "arc_challenge", "option_order")["letter_logprob"]
    assert summary["n_items"] == 2 and summary["flip_rate"]["ci"] is not None
    assert len(store.item_table("tiny", "arc_challenge", "option_order")) == 2
    assert store.comparisons() == [] and store.model_calls() == {"tiny": 24}
    assert store.suite_records("first_label") == []  # written before suites could add records
    # its GRID card rebuilt from the old store alone, under the current schema
    card = build_card(store, "tiny", "arc_challenge", OLD_RUN, n_boot=200, suites=registry.suites())
    validate_card(card.to_data())
    store.conn.close()
    untouched(old)
