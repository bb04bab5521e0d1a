"""Stored runs of planted trials for the regression commands."""

from __future__ import annotations

import json
from pathlib import Path

from flipgate.grammar import GRAMMAR_VERSION
from flipgate.results import Trial
from flipgate.store import TRIAL_COLUMNS, TrialStore

SHA = "ab" * 32


K = 4


FACET = "option_order"


THRESHOLDS = """\
version: 1
thresholds:
  - metric: delta_flip_rate
    vs: baseline
    max: 0.05
    rule: lower
  - metric: delta_accuracy
    vs: baseline
    min: -0.05
    rule: lower
"""


def stable(i: int, condition: int) -> str:
    """Always the right answer: no flips."""
    return "A"


def make_run(
    root: Path,
    run_id: str,
    answer=stable,
    items=range(20),
    model="m",
    datasets=("ds_a",),
    meta: dict | None = None,
    config: dict | None = None,
    sha: str = SHA,
    close: bool = True,
    control: bool = False,
) -> Path:
    """A finished run directory ``root/run_id`` with one model's option_order trials (and, with
    ``control``, its same-ordering control's: the canonical ordering K times)."""
    run_dir = root / run_id
    store = TrialStore(run_dir / "trials.sqlite")
    store.add_model(
        model,
        {"weights_sha256": f"w-{model}-{run_id}"},
        {
            "id": model,
            "readouts": ["regex"],
            "primary_readout": "regex",
            "suites": ["order"],
            **(config or {}),
        },
    )
    rows = []
    for dataset in datasets:
        store.add_manifest(FACET, dataset, K, sha, f"fixtures/manifests/{FACET}__{dataset}.json")
        cells = [(FACET, c, [(j + c) % 4 for j in range(4)]) for c in range(K)]
        if control:
            cells += [(f"same_ordering:{FACET}", c, [0, 1, 2, 3]) for c in range(K)]
        for i, (cell, c, perm) in ((i, x) for i in items for x in cells):
            label = answer(i, c if cell == FACET else 0)
            rows.append(
                dict(
                    zip(
                        TRIAL_COLUMNS,
                        [
                            run_id,
                            model,
                            f"w-{model}",
                            dataset,
                            f"{dataset}/item{i}",
                            cell,
                            c,
                            perm,
                            0,
                            f"p{i}-{c}",
                            json.dumps({"text": f" {label}"}),
                            {"regex": label},
                            {"regex": label},
                            {"regex": label == "A"},
                            "A",
                            4,
                            100,
                            2,
                            0.1,
                            0.0,
                            0,
                        ],
                    )
                )
            )
    store.add_trials([Trial(**row) for row in rows])
    store.set_meta(
        {
            "run_id": run_id,
            "created": "2026-01-01T00:00:00+00:00",
            "git_commit": "abc1234",
            "grammar_version": GRAMMAR_VERSION,
            "seed": 42,
            "k": K,
            "finished": "2026-01-01T00:10:00+00:00",
            "exit_status": 1,
            **(meta or {}),
        }
    )
    if close:
        store.conn.close()
    return run_dir


def runs_root(tmp_path: Path) -> tuple[Path, Path]:
    """Where a test's runs go (not created yet) and a thresholds folder holding
    :data:`THRESHOLDS`."""
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    (thresholds / "default.yaml").write_text(THRESHOLDS)
    return tmp_path / "runs", thresholds
