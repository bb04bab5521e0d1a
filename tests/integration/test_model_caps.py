"""A model's own cap on a dataset (a models.yaml entry's ``datasets: [{name, n}]``): its cells
take the first n of the items the dataset's cells draw, in both fixed-N and sequential audits,
and other models keep the dataset's cap."""

from __future__ import annotations

import sqlite3

import pytest
from support.paths import write
from support.suite_runs import PASSING, models_yaml, run_suite

from flipgate import FlipgateError
from flipgate.config import load_models


def models(tiny_model_dir, tmp_path, sequential: bool):
    path = models_yaml(
        tmp_path / "models.yaml",
        f"""
  - {{id: whole, backend: hf, source: {{path: "{tiny_model_dir}"}}, max_new_tokens: 3,
     readouts: [letter_logprob]}}
  - {{id: capped, backend: hf, source: {{path: "{tiny_model_dir}"}}, max_new_tokens: 3,
     readouts: [letter_logprob], datasets: [{{name: arc_challenge, n: 2}}]}}
""",
        datasets="[arc_challenge]",
    )
    text = path.read_text().replace(
        "items_per_dataset: 3",
        "items_per_dataset: 3\n  sequential: "
        + ("{batch_items: 8, min_items: 16}" if sequential else "false"),
    )
    path.write_text(text)
    return path


@pytest.mark.slow
def test_the_cap_is_read_per_model_and_dataset(tiny_model_dir, tmp_path):
    cfg = load_models(models(tiny_model_dir, tmp_path, sequential=False))
    assert cfg.cells("capped") == cfg.cells("whole")  # the same cells, fewer items
    assert cfg.model_caps == {"capped": {"arc_challenge": 2}}
    assert cfg.n_items("arc_challenge", None, "capped") == 2
    assert cfg.n_items("arc_challenge", None, "whole") == 3
    assert cfg.n_items("arc_challenge", 1, "capped") == 1  # --items-per-dataset below the cap
    assert cfg.n_items("arc_challenge", 10, "capped") == 2  # the model's cap holds above it


@pytest.mark.slow
def test_an_unknown_dataset_in_a_cap_is_named(tiny_model_dir, tmp_path):
    path = models(tiny_model_dir, tmp_path, sequential=False)
    path.write_text(path.read_text().replace("{name: arc_challenge, n: 2}", "{name: mmlu, n: 2}"))
    with pytest.raises(FlipgateError, match=r"models\[1\]\.datasets\[0\].*'mmlu'"):
        load_models(path)


@pytest.mark.slow
@pytest.mark.parametrize("sequential", [False, True], ids=["fixed-N", "sequential"])
def test_a_capped_model_measures_fewer_items(tiny_model_dir, tmp_path, sequential):
    thresholds = write(tmp_path / "thresholds" / "default.yaml", PASSING).parent
    proc = run_suite(tmp_path, models(tiny_model_dir, tmp_path, sequential), thresholds)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    store = next((tmp_path / "runs").glob("*/trials.sqlite"))
    with sqlite3.connect(store) as conn:
        rows = conn.execute(
            "SELECT model_id, facet, COUNT(DISTINCT item_id), COUNT(*) FROM trials "
            "GROUP BY model_id, facet"
        ).fetchall()
    got = {(m, f): (items, n) for m, f, items, n in rows}
    assert got[("capped", "option_order")] == (2, 12)
    assert got[("capped", "same_ordering:option_order")] == (2, 12)
    assert got[("whole", "option_order")] == (3, 18)  # (below min_items: no early stop)
