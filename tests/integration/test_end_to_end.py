"""The conformance suite run as a user runs it: pytest on suites/, xdist, cards, Allure, cache,
replay."""

from __future__ import annotations

import json

import pytest
from support.paths import REPO, write
from support.suite_runs import PASSING, models_yaml, run_suite

from flipgate.cards import validate_card
from flipgate.store import TrialStore, export_replay

#: every test here runs audits, servers or fits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def xdist_run(tiny_model_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    models = models_yaml(
        tmp / "models.yaml",
        f"""
  - {{id: tiny-fp32, backend: hf, source: {{path: "{tiny_model_dir}"}}, batch_size: 6,
     max_new_tokens: 3}}
  - {{id: tiny-bf16, backend: hf, source: {{path: "{tiny_model_dir}"}}, dtype: bfloat16,
     max_new_tokens: 3, readouts: [letter_logprob]}}
""",
    )
    thresholds = write(tmp / "thresholds" / "default.yaml", PASSING).parent
    proc = run_suite(tmp, models, thresholds, "-n", "2", "-vv", odi=True)
    return tmp, models, thresholds, proc


def test_xdist_run_passes_and_writes_valid_cards(xdist_run):
    tmp, _, _, proc = xdist_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # 2 models x 2 datasets: the facet cells and the ODI fit pass; the controls of greedy local
    # models answer their replicates as copies: "floor 0 by construction", not applicable
    assert "flipgate: cells: 5 gated, 4 not applicable" in proc.stdout, proc.stdout[-3000:]
    assert "5 passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-3000:]
    # the controller's live display (lines in a log): 2 x 2 x 2 cells x 3 items x K=6 trials
    assert "flipgate: progress 144/144 trials (100%)" in proc.stderr, proc.stderr[-2000:]
    # sequential by default, each cell capped at its 3 items (fewer than min_items: no early stop)
    assert (
        "flipgate: sequential gates: 0 of 8 cells stopped before their cap, 0 model calls saved "
        "(cap: 144)"
    ) in proc.stdout, proc.stdout[-3000:]
    # the controls' replicates are copies of their facets' canonical orderings: counted as calls
    # and said not to be computed (2 models x 2 datasets x 3 items x K = 6 replicates)
    (copies,) = [line for line in proc.stdout.splitlines() if "answered as copies" in line]
    assert copies.startswith("flipgate: 72 of the 144 calls were answered as copies"), copies
    # loadgroup: a (model, facet, dataset) group — facet cell and control — ran on one worker
    workers = {}
    for line in proc.stdout.splitlines():
        if line.startswith("[gw") and "PASSED" in line:
            workers.setdefault(line.rsplit("@", 1)[-1].strip(), set()).add(line.split("]")[0])
    groups = {
        f"{m}/option_order/{d}"
        for m in ("tiny-fp32", "tiny-bf16")
        for d in ("arc_challenge", "commonsense_qa")
    }
    assert set(workers) == groups | {"odi"} and all(len(w) == 1 for w in workers.values()), workers
    assert len(set.union(*workers.values())) == 2  # both workers took groups
    cards = sorted((tmp / "cards").glob("*/*.json"))
    assert [f"{p.parent.name}/{p.stem}" for p in cards] == [
        "tiny-bf16/arc_challenge",
        "tiny-bf16/commonsense_qa",
        "tiny-fp32/arc_challenge",
        "tiny-fp32/commonsense_qa",
    ]
    for path in cards:
        card = json.loads(path.read_text())
        validate_card(card)  # merged from both workers' trials: facet and control in one card
        assert {c: s["n_items"] for c, s in card["sequential"].items()} == {
            "option_order": 3,
            "same_ordering:option_order": 3,
        }
        assert set(card["order_robustness"]) == {"option_order"} and set(card["controls"]) == {
            "same_ordering:option_order"
        }
        # flip_rate <= 1.0 can never be violated: its tests decide nothing (inconclusive, the
        # lower rule passes it with a warning); parse_rate >= 0.0 is a point rule
        assert len(card["thresholds"]) == 2 and all(
            v["outcome"] in ("pass", "warn") for v in card["thresholds"]
        )
    assert (tmp / "cards/tiny-fp32/model-index.yaml").exists()
    odi = json.loads((tmp / "cards/tiny-bf16/commonsense_qa.json").read_text())["odi"]
    assert (
        odi["panel"] == ["tiny-fp32", "tiny-bf16"]
        and odi["passed"]
        and odi["readouts"] == {"option_order": "letter_logprob"}
    )
    assert (
        set(odi["cells"]) == {"option_order/commonsense_qa"}
        and odi["sizes"]["correct"]["trials"] == 2 * 2 * 3 * 6
    )


def test_allure_results_labels_and_attachments(xdist_run):
    tmp = xdist_run[0]
    results = [json.loads(p.read_text()) for p in (tmp / "allure").glob("*-result.json")]
    cells = [r for r in results if r["name"].startswith("option_order")]
    assert len(cells) == 4
    labels = {(lab["name"], lab["value"]) for r in cells for lab in r["labels"]}
    assert {
        ("epic", "option_order"),
        ("feature", "arc_challenge"),
        ("story", "tiny-fp32"),
    } <= labels
    names = {a["name"] for r in cells for a in r["attachments"]}
    assert {
        "per-item results.csv",
        "flip rate.png",
        "cell card section.json",
        "sequential stop.json",
    } <= names
    assert sum(r["name"].startswith("GRID card") for r in results) == 4
    (odi,) = [r for r in results if {"name": "epic", "value": "ODI"} in r["labels"]]
    assert odi["status"] == "passed" and {"ODI sigma_pi and delta.png", "ODI posterior.csv"} <= {
        a["name"] for a in odi["attachments"]
    }
    assert "run_id=" in (tmp / "allure" / "environment.properties").read_text()


def test_card_and_allure_carry_the_same_numbers(xdist_run):
    """Each cell's summaries are computed once, by its test: the Allure attachment and the GRID
    card show the same stored numbers (facet and control cells, every readout)."""
    tmp = xdist_run[0]
    compared = 0
    for result in (tmp / "allure").glob("*-result.json"):
        result = json.loads(result.read_text())
        labels = {lab["name"]: lab["value"] for lab in result["labels"]}
        attachments = result.get("attachments", [])
        section = [a for a in attachments if a["name"] == "cell card section.json"]
        if not section:
            continue
        attached = json.loads((tmp / "allure" / section[0]["source"]).read_text())["summaries"]
        card = json.loads(
            (tmp / "cards" / labels["story"] / f"{labels['feature']}.json").read_text()
        )
        cell = labels["epic"]
        shown = (card["order_robustness"] | card["controls"])[cell]
        assert attached == shown, (cell, labels)
        compared += 1
    assert compared == 8  # 2 models x 2 datasets x (facet + control)


def test_rerun_hits_cache_and_failing_threshold_fails(xdist_run):
    tmp, models, _, _ = xdist_run
    strict = write(
        tmp / "strict" / "default.yaml",
        "thresholds:\n  - {metric: flip_rate, max: 0.0, rule: lower}\n"
        "  - {metric: flip_rate, facet: same_ordering, max: 1.0, rule: point}\n",
    ).parent
    proc = run_suite(tmp, models, strict, "-k", "option_order")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "flip_rate <= 0.0 (lower)" in proc.stdout and "-> fail" in proc.stdout
    run_dirs = sorted((tmp / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    rerun = TrialStore(run_dirs[-1] / "trials.sqlite").trials(facet="option_order")
    assert (
        len(rerun) == 2 * 2 * 3 * 6 and rerun["from_cache"].all()
    )  # no model call on a warm cache
    (calls,) = [line for line in proc.stdout.splitlines() if "model calls this run" in line]
    counts = calls.split(": ", 2)[2].split(" (")[0].split(", ")
    assert len(counts) == 2 and all(c.endswith(" 0") for c in counts), calls


def test_replay_reanalyses_recorded_outputs(xdist_run):
    tmp, _, thresholds, _ = xdist_run
    first_run = sorted((tmp / "runs").iterdir(), key=lambda p: p.stat().st_mtime)[0]
    replay_file = tmp / "tiny-fp32.replay.jsonl"
    assert (
        export_replay(TrialStore(first_run / "trials.sqlite"), replay_file, "tiny-fp32")
        == 2 * 2 * 3 * 6
    )
    models = models_yaml(
        tmp / "replay.yaml",
        f'  - {{id: tiny-fp32, backend: replay, source: {{path: "{replay_file}"}}}}',
    )
    out = tmp / "replayed"
    proc = run_suite(out, models, thresholds)
    assert proc.returncode == 0, proc.stdout[-3000:]
    original = json.loads((tmp / "cards/tiny-fp32/arc_challenge.json").read_text())
    replayed = json.loads((out / "cards/tiny-fp32/arc_challenge.json").read_text())
    for readout in ("letter_logprob", "regex"):
        assert (
            replayed["order_robustness"]["option_order"][readout]
            == original["order_robustness"]["option_order"][readout]
        )


def test_malformed_models_yaml_is_a_clear_collection_error(tmp_path):
    models = write(
        tmp_path / "models.yaml",
        "models:\n  - id: m\n    backend: hf\n    source: {path: x}\n    dtype: fp8\n",
    )
    thresholds = write(tmp_path / "thr" / "default.yaml", PASSING).parent
    proc = run_suite(tmp_path, models, thresholds)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{models}: field models[0].dtype" in out and "(value: 'fp8')" in out
    assert "Traceback" not in out


def test_bad_thresholds_file_is_a_clear_collection_error(tmp_path, tiny_model_dir):
    models = models_yaml(
        tmp_path / "models.yaml",
        f'  - {{id: m, backend: hf, source: {{path: "{tiny_model_dir}"}}}}',
    )
    thresholds = write(
        tmp_path / "thr" / "default.yaml",
        "thresholds:\n  - {metric: flip_rate, max: 0.2, facet: colour}\n",
    ).parent
    proc = run_suite(tmp_path, models, thresholds)
    out = proc.stdout + proc.stderr
    assert (
        proc.returncode != 0 and "unknown facet (value: 'colour')" in out and "Traceback" not in out
    )


def test_groups_are_scheduled_order_cells_first_then_the_envelope_then_odi():
    """The collection is sorted free-form facet cells → other cells → envelope → ODI (stable):
    the ranks the suites give their cases (flipgate.suite.api.Case.rank). ODI waits for every
    order cell: the envelope's large independent cells take the workers that free up while the
    last order cells finish, and the other suites come after ODI, filling the other worker
    while it fits."""
    from types import SimpleNamespace

    from flipgate.config import load_models
    from flipgate.envelope.suite import SUITE as ENVELOPE
    from flipgate.odi.suite import SUITE as ODI
    from flipgate.order.suite import SUITE as ORDER
    from flipgate.plugin import CELL_FIXTURE, _Param, pytest_collection_modifyitems

    MODEL = "smollm2-135m-instruct"

    cfg = load_models(REPO / "models.yaml")
    ctx = SimpleNamespace(
        audit_config=lambda: cfg,
        memo=lambda key, make: make(),
        path=lambda option: REPO / "suites/envelope/envelopes/default.yaml",
        option=lambda name: "models.yaml",
    )

    def item(name, suite=None, part=None, cell=None):
        params = {}
        if suite is not None:
            case = next(
                c
                for c in suite.cases(ctx, part)
                if cell is None or (c.param[0] == cell and c.models == (MODEL,))
            )
            params = {CELL_FIXTURE: _Param(suite.name, case)}
        return SimpleNamespace(
            name=name, callspec=SimpleNamespace(params=params), user_properties=[]
        )

    items = [
        item("odi", ODI),
        item("option", ORDER, "option_order", "option_order"),
        item("control", ORDER, "same_ordering", "same_ordering:option_order"),
        item("plain"),
        item("envelope", ENVELOPE),
        item("chunks", ORDER, "evidence_chunk_order", "evidence_chunk_order"),
    ]
    pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["chunks", "option", "control", "plain", "envelope", "odi"]
    # each cell names the model it gates for the controller's ledger; panel-wide cells none
    tagged = {i.name: dict(i.user_properties).get("flipgate_models") for i in items}
    assert tagged == {
        "envelope": None,
        "control": [MODEL],
        "chunks": [MODEL],
        "option": [MODEL],
        "plain": None,
        "odi": None,
    }
