"""The gates issue's planted regression, end to end (docs/definitions.md §12): two replay models
on 25 ARC items, K = 6, a models.yaml that does not mention ``sequential``. The candidate newly
flips on 10 of the 25 items and fixes none (exact paired p = 0.0013 against
``delta_flip_rate <= 0.05``); under the turn-3 rule the case was "inconclusive" and passed. Now
it fails in the run (exit 1) and ``flipgate compare`` of the two runs exits 1, while an identical
twin passes both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO, write
from support.scripted import ScriptedBackend
from support.suite_runs import run_suite

from flipgate.calls import Auditor, Paths
from flipgate.config import load_models
from flipgate.exitcodes import GATE_FAILED
from flipgate.items import load_items
from flipgate.order.measure import order_cells
from flipgate.store import export_replay

CAP, DATASET, FACET = 25, "arc_challenge", "option_order"
#: the positions (in the seeded order) of the items the candidate newly flips on: 10 of 25
PLANTED = (0, 2, 5, 7, 10, 12, 15, 17, 20, 22)
THRESHOLDS = """
level: 0.95
thresholds:
  - {metric: flip_rate, max: 0.25, rule: lower}
  - {metric: flip_rate, facet: same_ordering, max: 0.5, rule: lower}
  - {metric: delta_flip_rate, vs: baseline, max: 0.05, rule: lower}
  - {metric: delta_delta_order, vs: baseline, facet: same_ordering, max: 0.5, rule: lower}
"""


def models_yaml(path: Path, replays: dict[str, Path], baseline: str = "v1") -> Path:
    entries = "\n".join(
        f'  - {{id: {m}, backend: replay, source: {{path: "{p}"}}, suites: [order]'
        + (f", baseline: {baseline}" if m != baseline else "")
        + "}"
        for m, p in replays.items()
    )
    return write(
        path,
        f"""
audit:
  k: 6
  items_per_dataset: {CAP}
  bootstrap: {{n: 200}}
  facets:
    option_order: {{datasets: [{DATASET}]}}
models:
{entries}
""",
    )


def gold_or_first(planted: set[str]):
    """A scripted rule: the gold option's label, except on ``planted`` items, where it always
    takes the first label (a position bias: the item flips)."""
    items = {it.item_id: it for it in load_items_for_rule()}

    def rule(req):
        item = items[req.key[1]]
        if item.item_id in planted:
            return req.labels[0]
        gold = item.options[item.gold].strip()
        return next(line[0] for line in req.messages[0][1].splitlines() if line[2:].strip() == gold)

    return rule


def load_items_for_rule():
    from flipgate.config import DatasetSpec

    return load_items(DatasetSpec(DATASET), 500)


@pytest.fixture(scope="module")
def replays(tmp_path_factory) -> dict[str, Path]:
    """Replay files of v1 (always right: never flips), v2 (the planted regression) and v1-twin
    (v1's answers in a file of its own: another model identity), recorded by scripted models
    answering exactly the prompts the audit shows (its own models.yaml, loaded)."""
    tmp = tmp_path_factory.mktemp("planted-record")
    out = {m: tmp / f"{m}.jsonl" for m in ("v1", "v2", "v1-twin")}
    for path in out.values():
        path.write_text("")
    cfg = load_models(models_yaml(tmp / "models.yaml", out))
    auditor = Auditor(
        cfg, "record", Paths(tmp / "store.sqlite", None, tmp / "manifests", tmp / "models")
    )
    order = [it.item_id for it in auditor.plans.items(DATASET, FACET)][:CAP]
    planted = {order[i] for i in PLANTED}
    rules = {"v1": gold_or_first(set()), "v2": gold_or_first(planted), "v1-twin": None}
    for model_id, rule in rules.items():
        auditor._backends[model_id] = ScriptedBackend(model_id, rule or rules["v1"])
        for cell in (FACET, f"same_ordering:{FACET}"):
            order_cells(auditor).trials(model_id, DATASET, cell)
        export_replay(auditor.store, out[model_id], model_id)
    return out


def audit(
    tmp: Path, replays: dict[str, Path], candidate: str, alone: bool = False
) -> subprocess.CompletedProcess:
    """The order and regression suites on v1 and ``candidate`` (its baseline v1), or on
    ``candidate`` alone."""
    roster = (
        {candidate: replays[candidate]}
        if alone
        else {"v1": replays["v1"]} | {candidate: replays[candidate]}
    )
    models = models_yaml(tmp / "models.yaml", roster, "v1" if not alone else candidate)
    thresholds = write(tmp / "thresholds" / "default.yaml", THRESHOLDS).parent
    return run_suite(tmp, models, thresholds, "-k", "option_order or versions", "-rA")


@pytest.mark.slow
def test_the_planted_regression_fails_in_the_run_and_in_compare(replays, tmp_path):
    proc = audit(tmp_path, replays, "v2")
    assert proc.returncode == GATE_FAILED, proc.stdout[-4000:] + proc.stderr[-2000:]
    # a set: on CI (the CI variable set) pytest's short summary repeats the whole failure message
    (line,) = {
        line.strip()
        for line in proc.stdout.splitlines()
        if "delta_flip_rate[vs=baseline] <= 0.05 (lower)" in line and "-> fail" in line
    }
    assert "0.400" in line and "by exact paired (unconditional) p = 0.0013 <= 0.0500 (n = 25)" in (
        line
    ), line
    # each version audited in a run of its own (each cell stops on its own thresholds), then
    # compared: `flipgate compare` exits 1 on the regression
    runs = {m: audit(tmp_path / m, replays, m, alone=True) for m in ("v1", "v2")}
    stores = {m: next((tmp_path / m / "runs").iterdir()) / "trials.sqlite" for m in runs}
    compare = subprocess.run(
        [sys.executable, "-m", "flipgate", "compare", str(stores["v1"]), str(stores["v2"])]
        + ["--thresholds", str(tmp_path / "thresholds")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert compare.returncode == GATE_FAILED, compare.stdout[-3000:] + compare.stderr[-2000:]
    row = next(line for line in compare.stdout.splitlines() if "delta_flip_rate" in line)
    assert "fail" in row and "exact paired (unconditional) p = " in row, row


@pytest.mark.slow
def test_an_identical_twin_passes(replays, tmp_path):
    proc = audit(tmp_path, replays, "v1-twin")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (line,) = {
        line.strip()
        for line in proc.stdout.splitlines()
        if "delta_flip_rate[vs=baseline] <= 0.05 (lower)" in line
    }
    # no discordant item among 25 cannot prove a delta within 0.05 (0.95^25 = 0.28): the lower
    # rule passes it, with a warning
    assert "0.000" in line and "inconclusive" in line, line
