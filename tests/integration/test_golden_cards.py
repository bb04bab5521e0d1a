"""Golden run: a fixed audit (recorded model outputs replayed) must write the same GRID cards,
number for number, as the checked-in ones in tests/golden/cards/. A refactor that changes any
card number, verdict, section or Markdown line fails here.

Only what legitimately differs between runs is masked (:func:`normalise`): run ids, timestamps,
store paths, library versions, the git commit and the replay file's location. ODI's section holds
MCMC summaries, whose draws differ by CPU class: its numbers get a Monte Carlo tolerance, its
structure, strings and verdicts none (tests/support/golden_compare.py). To accept an intended
change, rewrite the goldens and review their diff:

    FLIPGATE_GOLDEN=update .venv/bin/python -m pytest tests/integration/test_golden_cards.py

``FLIPGATE_GOLDEN=record`` first re-records the replayed outputs from two tiny random models
(tests/golden/replay/*.jsonl); the goldens then change too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from support.golden_audit import GOLDEN, THRESHOLDS, models_yaml
from support.golden_compare import card_mismatches, markdown_mismatches
from support.paths import write
from support.suite_runs import run_suite

from flipgate.store import TrialStore, export_replay

#: every test here runs audits, servers or fits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow

MODE = os.environ.get("FLIPGATE_GOLDEN", "check")  # check | update | record
MASK = "<masked>"
#: card fields that identify a run rather than describe the model (masked before comparing)
RUN_FIELDS = {"run_id", "created", "trials_store", "library_versions", "git_commit", "date"}


def normalise(value, root: Path):
    """``value`` with run identity masked and the run's paths made relative to ``root``."""
    if isinstance(value, dict):
        return {
            k: MASK if k in RUN_FIELDS and v is not None else normalise(v, root)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [normalise(v, root) for v in value]
    if isinstance(value, str):
        value = value.replace(str(GOLDEN), "<golden>").replace(str(root), "<run>")
        value = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+\-:\dZ]*", MASK, value)  # dates
        return re.sub(r"\b\d{8}T\d{6}Z?[-\w]*", MASK, value)  # run ids in free text
    return value


def normalise_markdown(text: str, card: dict, root: Path) -> str:
    for key in ("run_id", "created", "trials_store"):
        if card["run"].get(key):
            text = text.replace(str(card["run"][key]), MASK)
    receipt = card.get("axis_receipt", {})
    if receipt.get("git_commit"):
        text = text.replace(receipt["git_commit"], MASK).replace(receipt["git_commit"][:12], MASK)
    return normalise(text, root)


@pytest.fixture(scope="module")
def replays(request, tmp_path_factory) -> dict[str, Path]:
    """The recorded outputs of the two versions (re-recorded under FLIPGATE_GOLDEN=record)."""
    files = {m: GOLDEN / "replay" / f"{m}.jsonl" for m in ("tiny-v1", "tiny-v2")}
    if MODE == "record":
        files["tiny-v1"].parent.mkdir(parents=True, exist_ok=True)
        tiny = request.getfixturevalue("tiny_model_dir")
        tmp = tmp_path_factory.mktemp("golden-record")
        src = f'backend: hf, source: {{path: "{tiny}"}}'
        models = models_yaml(tmp / "models.yaml", src, src + ", dtype: bfloat16")
        thresholds = write(tmp / "thresholds" / "default.yaml", THRESHOLDS).parent
        proc = run_suite(tmp, models, thresholds, odi=True)
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
        store = TrialStore(next((tmp / "runs").iterdir()) / "trials.sqlite")
        for model_id, path in files.items():
            export_replay(store, path, model_id)
    return files


@pytest.fixture(scope="module")
def golden_run(replays, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("golden")
    source = 'backend: replay, source: {{path: "{}"}}'
    models = models_yaml(
        tmp / "models.yaml",
        source.format(replays["tiny-v1"]),
        source.format(replays["tiny-v2"]),
    )
    thresholds = write(tmp / "thresholds" / "default.yaml", THRESHOLDS).parent
    proc = run_suite(tmp, models, thresholds, "-rA", odi=True)
    return tmp, proc


def test_golden_run_writes_the_golden_cards(golden_run):
    tmp, proc = golden_run
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    written = sorted(p.relative_to(tmp / "cards") for p in (tmp / "cards").glob("*/*.json"))
    assert written, proc.stdout[-3000:]
    if MODE in ("update", "record"):
        shutil.rmtree(GOLDEN / "cards", ignore_errors=True)
    for rel in written:
        card = json.loads((tmp / "cards" / rel).read_text())
        got = {
            "card": normalise(card, tmp),
            "markdown": normalise_markdown(
                (tmp / "cards" / rel).with_suffix(".md").read_text(), card, tmp
            ).splitlines(),
        }
        path = GOLDEN / "cards" / rel
        if MODE in ("update", "record"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
            continue
        assert path.exists(), f"no golden card {rel}; run FLIPGATE_GOLDEN=update to add it"
        expected = json.loads(path.read_text())
        mismatches = card_mismatches(got["card"], expected["card"])
        assert not mismatches, (rel, mismatches)
        mismatches = markdown_mismatches(got["markdown"], expected["markdown"])
        assert not mismatches, (rel, mismatches)
    goldens = sorted(p.relative_to(GOLDEN / "cards") for p in (GOLDEN / "cards").glob("*/*.json"))
    assert written == goldens


def test_golden_run_outcomes(golden_run):
    """The golden thresholds are set so that the run both passes and fails cells."""
    _, proc = golden_run
    summary = proc.stdout.strip().splitlines()[-1]
    assert "passed" in summary and "failed" in summary, summary
