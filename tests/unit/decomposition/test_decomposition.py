"""Readout decomposition (docs/definitions.md §8): hand-computed splits, a planted-decomposition
recovery through the runner at N=300, the gate's verdicts, the paraphrase gate stopping a cell,
and the card section."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest
from support.decomposition_tables import table
from support.paths import REPO, write
from support.scripted import ScriptedBackend

from flipgate import registry
from flipgate.backends.base import Output, Request
from flipgate.calls import Auditor, Paths
from flipgate.cards.markdown import card_markdown
from flipgate.cards.write import write_cards
from flipgate.config import AuditConfig, ThresholdSet, parse_thresholds
from flipgate.decomposition.cell import DecompositionCell
from flipgate.decomposition.gate import gate
from flipgate.decomposition.plan import DecompositionPlan
from flipgate.decomposition.record import DecompositionRecord
from flipgate.decomposition.run import DecompositionRunner
from flipgate.items import DatasetSpec, load_items
from flipgate.metrics import decompose, item_flips, paired_artifact
from flipgate.paraphrases import Paraphrase, ParaphraseStore


def test_hand_computed_split_with_a_parse_failure():
    trials = table(
        {
            "i1": {"regex": [0, 0, 0], "letter_logprob": [0, 1, 0]},  # artifact flip
            "i2": {"regex": [1, 2, 1], "letter_logprob": [1, 2, 1]},  # genuine flip, both see it
            "i3": {"regex": [3, None, None], "letter_logprob": [3, 0, 3]},  # regex parsed once
            "i4": {"regex": [2, 2, 2], "letter_logprob": [2, 2, 2]},
        }
    )
    flips = item_flips(trials, "regex")
    assert flips.to_dict() == pytest.approx({"i1": 0, "i2": 1, "i3": np.nan, "i4": 0}, nan_ok=True)
    d = decompose(trials, "label_set", ["regex", "letter_logprob"], n=200, seed=1)
    assert d.genuine.estimate == pytest.approx(1 / 3) and d.genuine.n_items == 3
    letter = d.readouts["letter_logprob"]
    assert letter.flip_rate.estimate == pytest.approx(3 / 4)  # i3 counts: the letters parsed
    # paired over i1, i2, i4 (i3: regex parsed once): (1 + 1 + 0)/3 − (0 + 1 + 0)/3
    assert letter.artifact.estimate == pytest.approx(1 / 3) and letter.artifact.n_items == 3
    assert letter.artifact_share.estimate == pytest.approx(0.5)
    assert d.readouts["regex"].parse_rate == pytest.approx(10 / 12)
    assert d.surface["regex"]["i3"] is None and d.surface["letter_logprob"]["i1"] == 1
    assert d.metrics("regex")["genuine_flip_rate"] is d.genuine
    lo, hi = letter.artifact.ci
    assert lo <= 1 / 3 <= hi


def test_artifact_share_is_zero_when_the_readout_never_flips():
    steady = pd.Series({"a": 0.0, "b": 0.0}).rename_axis("item_id")
    flipping = pd.Series({"a": 1.0, "b": 0.0}).rename_axis("item_id")
    artifact, share = paired_artifact(steady, flipping, n=100)
    assert artifact.estimate == -0.5 and share.estimate == 0.0 and share.ci == (0.0, 0.0)


def test_artifact_share_counts_spurious_flips_when_the_readout_also_hides_some():
    """e flips on a (spurious) and c (genuine) and misses b's genuine flip: the net artifact is
    2/4 − 2/4 = 0, but half of e's flips are its own; e that flips only where e* does not,
    while missing three genuine flips, has a negative artifact and a share of 1."""
    ref = pd.Series({"a": 0.0, "b": 1.0, "c": 1.0, "d": 0.0}).rename_axis("item_id")
    e = pd.Series({"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0}).rename_axis("item_id")
    artifact, share = paired_artifact(e, ref, n=200)
    assert artifact.estimate == 0.0 and share.estimate == 0.5
    lo, hi = share.ci
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0
    ref = pd.Series({"a": 0.0, "b": 1.0, "c": 1.0, "d": 1.0}).rename_axis("item_id")
    e = pd.Series({"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0}).rename_axis("item_id")
    artifact, share = paired_artifact(e, ref, n=200)
    assert artifact.estimate == -0.5 and share.estimate == 1.0


# -- planted recovery ----------------------------------------------------------------------------

#: axis -> (genuine rate g, artifact rate q among items the model does not flip on)
PLANTED = {
    "option_order": (0.10, 0.50),
    "label_set": (0.15, 0.40),
    "prompt_format": (0.05, 0.30),
    "paraphrase": (0.30, 0.10),
}
LAST = {"option_order": 3, "label_set": 3, "prompt_format": 3, "paraphrase": 1}


class PlantedBackend(ScriptedBackend):
    """Answers the gold option, except: on an item drawn as genuinely unstable on an axis it
    answers another option in the axis's last variant (text and letters alike); on an item drawn
    as an artifact item, only the letter log-probs point elsewhere in that variant."""

    def __init__(self, items, flags):
        super().__init__("planted")
        self.items, self.flags = items, flags

    def complete(self, requests: list[Request]) -> list[Output]:
        self.calls += len(requests)
        out = []
        for r in requests:
            dataset, item_id, cell, cond, _ = r.key
            axis, item = cell[5:-1], self.items[item_id]
            genuine, artifact = self.flags[item_id, axis]
            last = cond == LAST[axis]
            said = (item.gold + 1) % item.n_options if genuine and last else item.gold
            read = (item.gold + 2) % item.n_options if artifact and last and not genuine else said

            def label(content: int) -> str:
                return r.labels[r.continuations.index(item.options[content])]

            out.append(
                Output(
                    f" {label(said)}",
                    {lab: -0.1 if lab == label(read) else -3.0 for lab in r.labels},
                    10,
                    2,
                    continuation_logprobs={
                        lab: -0.1 if lab == label(said) else -3.0 for lab in r.labels
                    },
                )
            )
        return out


def planted_auditor(tmp_path, n: int, thresholds: str | None = None):
    spec = DatasetSpec("basic_arithmetic")
    items = load_items(spec, n, 42)
    rng = random.Random(7)
    flags = {}
    for it in items:
        for axis, (g, q) in PLANTED.items():
            flags[it.item_id, axis] = (rng.random() < g, rng.random() < q)
    store = [
        Paraphrase(
            it.item_id,
            "p1",
            "Work out: " + it.question,
            "test",
            {"meaning": "pass", "difficulty": "pass"},
        )
        for it in items
    ]
    folder = tmp_path / "paraphrases"
    folder.mkdir()
    (folder / "store.jsonl").write_text("".join(p.to_json() + "\n" for p in store))
    plan = DecompositionPlan(
        (spec,), tuple(PLANTED), ("regex", "letter_logprob", "cloze"), n, folder
    )
    model = {
        "id": "planted",
        "backend": "hf",  # gives the cloze readout
        "readouts": ["regex", "letter_logprob"],
        "primary_readout": "regex",
        "suites": ["decomposition"],
    }
    cfg = AuditConfig(
        tmp_path / "models.yaml",
        {"planted": model},
        bootstrap_n=1000,
        plans={"decomposition": plan},
    )
    paths = Paths(tmp_path / "t.sqlite", tmp_path / "c.sqlite", tmp_path / "m", tmp_path / "models")
    auditor = Auditor(cfg, "r1", paths, progress=False)
    backend = PlantedBackend({it.item_id: it for it in items}, flags)
    auditor.backend = lambda model_id: backend
    return auditor, plan, flags, backend


def test_planted_decomposition_is_recovered_at_n300(tmp_path):
    auditor, plan, flags, _ = planted_auditor(tmp_path, 300)
    runner = DecompositionRunner(auditor, plan, ParaphraseStore.load(plan.paraphrases))
    for axis, (g, q) in PLANTED.items():
        trials = runner.trials("planted", plan.datasets[0], axis)
        d = decompose(trials, axis, ["regex", "letter_logprob", "cloze"], n=1000, seed=3)
        drawn = [flags[i, axis] for i in sorted(set(trials["item_id"]))]
        realised_g = np.mean([gen for gen, _ in drawn])
        realised_a = np.mean([art and not gen for gen, art in drawn])
        assert d.n_items == 300
        # the estimator reads exactly what was planted in this sample ...
        assert d.genuine.estimate == pytest.approx(realised_g)
        letter = d.readouts["letter_logprob"]
        assert letter.artifact.estimate == pytest.approx(realised_a)
        assert d.readouts["cloze"].artifact.estimate == 0.0
        # ... and its 95% CIs cover the rates it was drawn from
        lo, hi = d.genuine.ci
        assert lo <= g <= hi, (axis, d.genuine)
        lo, hi = letter.artifact.ci
        assert lo <= (1 - g) * q <= hi, (axis, letter.artifact)


def test_gate_decides_per_axis_and_readout(tmp_path):
    auditor, plan, _, _ = planted_auditor(tmp_path, 40)
    runner = DecompositionRunner(auditor, plan, ParaphraseStore.load(plan.paraphrases))
    d = decompose(
        runner.trials("planted", plan.datasets[0], "option_order"),
        "option_order",
        ["regex", "letter_logprob"],
    )
    path = write(
        tmp_path / "th.yaml",
        """
thresholds:
  - {metric: genuine_flip_rate, facet: decomposition, max: 0.9, rule: upper}
  - {metric: artifact_share@option_order, facet: decomposition, max: 0.01, rule: point}
  - {metric: artifact_share@paraphrase, facet: decomposition, max: 0.01, rule: point}
""",
    )
    ts = ThresholdSet(parse_thresholds(path)[0])
    verdicts = gate(d, ts, "basic_arithmetic")
    assert [(v.metric, v.readout, v.verdict) for v in verdicts] == [
        ("genuine_flip_rate", "regex", "pass"),
        ("artifact_share@option_order", "letter_logprob", "fail"),
    ]  # the paraphrase threshold gates another axis
    assert verdicts[0].facet == "decomposition[option_order]"


def test_cell_records_reports_and_the_card_shows_the_section(tmp_path, monkeypatch):
    auditor, plan, _, _ = planted_auditor(tmp_path, 20)
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        "thresholds:\n  - {metric: genuine_flip_rate, facet: decomposition, max: 0.9}\n",
    ).parent
    surfaces = []  # the axes each cell's flip-surface picture shows
    monkeypatch.setattr(
        "flipgate.decomposition.cell.report_decomposition",
        lambda record, verdicts, measured: surfaces.append([d.axis for d in measured]),
    )
    for axis in PLANTED:
        DecompositionCell(auditor, str(thresholds), plan, "planted", "basic_arithmetic", axis).run()
    assert surfaces[-1] == sorted(PLANTED) and [len(s) for s in surfaces] == [1, 2, 3, 4]
    records = auditor.store.records(DecompositionRecord, "planted")
    assert [r.axis for r in records] == sorted(PLANTED)
    assert records[2].gates["paraphrase"]["usable"] == 20  # label_set, option_order, paraphrase
    write_cards(auditor.store, tmp_path / "cards", "r1", 200, suites=registry.suites())
    card = json.loads((tmp_path / "cards/planted/basic_arithmetic.json").read_text())
    section = card["readout_decomposition"]
    assert card["scores"]["facet"] == "decomposition" and section["reference_readout"] == "regex"
    assert {a["axis"] for a in section["axes"]} == set(PLANTED)
    assert set(section["formats"]) >= {"fp-mcq-v1"} and len(section["formats"]) >= 4
    assert card["scores"]["accuracy_canonical"]["estimate"] == 1.0  # the gold in variant 0
    md = card_markdown(card, registry.suites())
    assert "## Readout decomposition" in md and "| option_order | letter_logprob | 20 |" in md


def test_paraphrase_gate_stops_the_cell_with_the_reason(tmp_path):
    auditor, plan, _, backend = planted_auditor(tmp_path, 6)
    first = load_items(plan.datasets[0], 1, 42)[0]
    with (plan.paraphrases / "new.jsonl").open("w") as f:
        f.write(
            Paraphrase(first.item_id, "g1", "Compute " + first.question, "model:x").to_json() + "\n"
        )
    thresholds = write(tmp_path / "thresholds" / "default.yaml", "thresholds: []\n").parent
    cell = DecompositionCell(
        auditor, str(thresholds), plan, "planted", "basic_arithmetic", "paraphrase"
    )
    with pytest.raises(
        pytest.fail.Exception, match=r"paraphrase gate: 1 rewrite\(s\) in .* are not checked"
    ):
        cell.run()
    (record,) = auditor.store.records(DecompositionRecord)
    assert record.decomposition is None and record.gates["paraphrase"]["unchecked"] == 1
    assert backend.calls == 0  # stopped before any model call


DECOMPOSED = """
audit:
  facets: {option_order: {datasets: [arc_easy]}}
  decomposition: {datasets: [basic_arithmetic], axes: [option_order, label_set]}
models:
  - {id: m, backend: hf, source: {path: x}, suites: [order, decomposition]}
"""


@pytest.mark.parametrize(
    "models,thresholds,needle",
    [
        (
            "\n".join(line for line in DECOMPOSED.splitlines() if "decomposition:" not in line),
            "[]",
            "models[0].suites: suite 'decomposition' needs audit.decomposition",
        ),
        (
            DECOMPOSED.replace("[basic_arithmetic]", "[arithmetic]"),
            "[]",
            "unknown dataset 'arithmetic'",
        ),
        (DECOMPOSED, "[{metric: genuine_flip_rate, max: 0.2}]", "decomposition metrics"),
        (
            DECOMPOSED,
            "[{metric: artifact@label_sets, facet: decomposition, max: 0.2}]",
            "unknown axis after '@'",
        ),
        (
            DECOMPOSED,
            "[{metric: genuine_flip_rate@paraphrase, facet: decomposition, max: 0.2}]",
            "selects no cell of this audit",
        ),
        (
            DECOMPOSED,
            "[{metric: artifact, facet: decomposition, readout: clozee, max: 0.2}]",
            "readout",
        ),
    ],
)
def test_bad_decomposition_config_names_file_and_field(tmp_path, models, thresholds, needle):
    from support.plans import threshold_plan

    from flipgate import FlipgateError
    from flipgate.config import load_models
    from flipgate.suite.threshold_coverage import check_thresholds

    path = write(tmp_path / "models.yaml", models)
    write(tmp_path / "th" / "default.yaml", f"thresholds: {thresholds}\n")
    with pytest.raises(FlipgateError) as err:
        cfg = load_models(path)
        check_thresholds(tmp_path / "th", cfg, *threshold_plan(cfg))
    assert needle in str(err.value)


def test_decomposition_thresholds_select_declared_axes(tmp_path):
    from support.plans import threshold_plan

    from flipgate.config import load_models
    from flipgate.suite.threshold_coverage import check_thresholds

    cfg = load_models(write(tmp_path / "models.yaml", DECOMPOSED))
    assert cfg.plans["decomposition"].readouts == ("regex", "letter_logprob", "cloze")
    write(
        tmp_path / "th" / "default.yaml",
        "thresholds:\n  - {metric: artifact_share@label_set, facet: decomposition, max: 0.5}\n"
        "  - {metric: parse_rate, facet: decomposition, readout: regex, min: 0.8}\n"
        "  - {metric: flip_rate, max: 0.3}\n",
    )
    assert check_thresholds(tmp_path / "th", cfg, *threshold_plan(cfg)) == []


def test_judge_gate_stops_a_first_position_judge_and_passes_a_faithful_one(tmp_path):
    """The shipped agreement set against two scripted judges: one that always names the first
    listed option (pure position bias) fails both checks; one that reads the labelled answer
    passes; the cell with the biased judge records the other readouts and fails."""
    from support.paths import REPO

    from flipgate.judging.choice import judge_gate, load_agreement_set

    replies = load_agreement_set(REPO / "fixtures/judge/agreement.jsonl")
    assert len(replies) >= 60 and sum(r.answer is None for r in replies) >= 10
    auditor, plan, _, backend = planted_auditor(tmp_path, 6)
    first = ScriptedBackend(  # always the option listed first, whatever its label
        "first", lambda req: req.messages[0][1].split("Options:\n")[1].split(". ")[0]
    )
    truth = {r.reply.strip(): r.answer for r in replies}

    def faithful(req):
        reply = req.messages[0][1].split("Reply:\n")[1].split("\n\n")[0]
        return truth.get(reply.strip()) or "none"

    judges = {"planted": backend, "first": first, "faithful": ScriptedBackend("faithful", faithful)}
    auditor.backend = lambda model_id: judges[model_id]
    for judge_id in ("first", "faithful"):
        auditor.config.models[judge_id] = {
            "id": judge_id,
            "backend": "scripted",
            "readouts": ["regex"],
            "primary_readout": "regex",
            "suites": [],
        }
    bad = judge_gate(auditor, "first", replies)
    assert not bad.passed and "agreement with the labelled set" in bad.reason
    assert "swap consistency 0.00" in bad.reason and bad.n == len(replies)
    good = judge_gate(auditor, "faithful", replies)
    assert good.passed and good.agreement == 1.0 and good.swap_consistency == 1.0
    lo, hi = good.agreement_ci
    assert lo < 1.0 == hi

    plan = DecompositionPlan(
        plan.datasets,
        ("label_set",),
        ("regex", "cloze", "judge"),  # cloze: the planted backend finds options by their text
        6,
        plan.paraphrases,
        judge_model="first",
        agreement_set=REPO / "fixtures/judge/agreement.jsonl",
    )
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        "thresholds:\n  - {metric: genuine_flip_rate, facet: decomposition, max: 1.0}\n",
    ).parent
    cell = DecompositionCell(
        auditor, str(thresholds), plan, "planted", "basic_arithmetic", "label_set"
    )
    calls = first.calls
    with pytest.raises(pytest.fail.Exception, match=r"judge gate: judge 'first': agreement"):
        cell.run()
    assert first.calls == calls  # the gate's calls came from the cache; no trial was judged
    (record,) = auditor.store.records(DecompositionRecord)
    assert set(record.decomposition.readouts) == {"regex", "cloze"}
    assert record.not_measured["judge"].startswith("judge gate: ")

    plan = DecompositionPlan(
        plan.datasets,
        ("label_set",),
        ("regex", "cloze", "judge"),
        6,
        plan.paraphrases,
        judge_model="faithful",
        min_agreement=0.5,
        min_swap_consistency=0.5,
        agreement_set=REPO / "fixtures/judge/agreement.jsonl",
    )
    DecompositionCell(
        auditor, str(thresholds), plan, "planted", "basic_arithmetic", "label_set"
    ).run()
    record = auditor.store.records(DecompositionRecord)[0]
    assert "judge" in record.decomposition.readouts and record.gates["judge"]["passed"]


def test_committed_axis_manifests_are_current():
    """fixtures/manifests/axes: each committed manifest is what the axes give today for its items
    (an edited format, label set or paraphrase store shows up here, not only in a new sha256); one
    for each axis and dataset of the default audit and of the release-scale plan."""

    from flipgate.axes import get_axis
    from flipgate.config import load_models
    from flipgate.decomposition.run import axis_manifest, decomposable

    root = REPO
    plans = [
        load_models(root / name).plans["decomposition"]
        for name in ("plans/release-scale.yaml", "models.yaml")
    ]
    plan = plans[0]  # the release-scale plan names every dataset the default one does
    assert {d.name for d in plans[1].datasets} <= {d.name for d in plan.datasets}
    store = ParaphraseStore.load(plan.paraphrases)
    files = sorted((root / "fixtures" / "manifests" / "axes").glob("*.json"))
    assert len(files) == len(plan.axes) * len(plan.datasets)
    for path in files:
        body = json.loads(path.read_text())
        items = load_items(
            plan.dataset(body["dataset"]), len(body["entries"]), body["seed"], keep=decomposable
        )
        axis = get_axis(body["axis"], store)
        shown = {it.item_id: axis.variants(it) for it in items}
        assert axis_manifest(body["axis"], body["dataset"], body["seed"], shown) == body, path


GOOD_REPLY = {
    "id": "r1",
    "question": "q",
    "labels": ["A", "B"],
    "options": ["x", "y"],
    "reply": "Answer: A",
    "answer": "A",
}


@pytest.mark.parametrize(
    "row, needle",
    [
        ("{not json", "line 2: not a JSON object"),
        ("[1, 2]", "line 2: not a JSON object (value: [1, 2])"),
        ({**GOOD_REPLY, "reply": None}, "line 2: field 'reply' must be a str (value: None)"),
        ({**GOOD_REPLY, "labels": "AB"}, "line 2: field 'labels' must be a list (value: 'AB')"),
        ({**GOOD_REPLY, "answer": "C"}, "line 2: field 'answer' must be one of the labels"),
    ],
)
def test_bad_agreement_set_line_names_file_line_and_field(tmp_path, row, needle):
    from flipgate import FlipgateError
    from flipgate.judging.choice import load_agreement_set

    path = tmp_path / "agreement.jsonl"
    bad = row if isinstance(row, str) else json.dumps(row)
    path.write_text(json.dumps(GOOD_REPLY) + "\n" + bad + "\n")
    with pytest.raises(FlipgateError) as err:
        load_agreement_set(path)
    assert str(path) in str(err.value) and needle in str(err.value)
