"""A control must measure (docs/definitions.md §12.5): a backend that answers a same-ordering
control's K replicates as copies of one computation (hf, greedy with shared prefixes) has not
measured a floor, so the control's summaries are kept and labelled "0 by construction (not
measured)" and its thresholds are not applicable, never a pass; a backend that computes each
replicate (sampling, served models, the scripted test double) gates the control as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.auditors import make_auditor
from support.scripted import ScriptedBackend
from support.suites import SUITES
from support.tiny_models import tiny_hf_config

from flipgate.backends.base import Request, measures_replicates
from flipgate.backends.floor import NOT_MEASURED_FLOOR, floor_not_measured
from flipgate.backends.hf import HFBackend
from flipgate.backends.replay import ReplayBackend
from flipgate.calls import Auditor, Paths
from flipgate.cards.build import build_card
from flipgate.cards.markdown import card_markdown
from flipgate.config import AuditConfig
from flipgate.gate.sequential import SequentialSettings, SequentialStop
from flipgate.items import DatasetSpec
from flipgate.order.cell import OrderCell
from flipgate.order.measure import order_cells
from flipgate.regression.compare import compare_cell
from flipgate.regression.runs import RunRecord
from flipgate.results import Verdict
from flipgate.suite.cell_loop import NOT_APPLICABLE

FACET, CONTROL, DATASET = "option_order", "same_ordering:option_order", "arc_challenge"
K, N_ITEMS = 6, 4
THRESHOLDS = """\
version: 1
level: 0.95
thresholds:
  - {metric: flip_rate, max: 1.0, rule: point}
  - {metric: flip_rate, facet: same_ordering, max: 0.05, rule: lower}
  - {metric: delta_order, facet: same_ordering, max: 1.0, rule: point}
"""


def thresholds_dir(tmp_path: Path, text: str = THRESHOLDS) -> str:
    (tmp_path / "thr").mkdir(exist_ok=True)
    (tmp_path / "thr" / "default.yaml").write_text(text)
    return str(tmp_path / "thr")


def hf_auditor(model_dir: Path, tmp_path: Path, sequential: bool = False, **model) -> Auditor:
    """An Auditor over the tiny random Llama: option order and its control on ARC, N items."""
    cfg = AuditConfig(
        tmp_path / "models.yaml",
        {
            "tiny": tiny_hf_config(
                model_dir,
                tmp_path / "models",
                max_new_tokens=2,
                readouts=["letter_logprob", "regex"],
                primary_readout="letter_logprob",
                **model,
            )
        },
        items_per_dataset=N_ITEMS,
        bootstrap_n=200,
        facets={FACET: [DatasetSpec(DATASET)]},
        controls={"same_ordering": [(FACET, DatasetSpec(DATASET))]},
        sequential=SequentialSettings(8, 16) if sequential else None,
    )
    paths = Paths(
        tmp_path / "runs" / "r1" / "trials.sqlite",
        tmp_path / "cache.sqlite",
        tmp_path / "manifests",
        tmp_path / "models",
    )
    return Auditor(
        cfg,
        "r1",
        paths,
        progress=False,
        thresholds_dir=thresholds_dir(tmp_path),
        fixed_n=not sequential,
    )


def gated(cell: OrderCell) -> list[Verdict]:
    """Run a cell that must be gated: a skip is this test's failure here, not a skipped test."""
    try:
        return cell.run()
    except pytest.skip.Exception as exc:
        raise AssertionError(f"the cell was skipped: {exc.msg}") from None


def count_computed(backend: HFBackend) -> list:
    """Requests the backend actually computes (prefix tree or plain batches), appended to."""
    computed: list = []
    tree, plain = backend._complete_tree, backend._complete_batch
    backend._complete_tree = lambda batch, ids: computed.extend(batch) or tree(batch, ids)  # type: ignore[method-assign]
    backend._complete_batch = lambda batch, prompts, n: (
        computed.extend(batch)
        or plain(  # type: ignore[method-assign]
            batch, prompts, n
        )
    )
    return computed


# -- which backends measure ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra, measures",
    [
        ({}, False),  # greedy with prefix sharing (the default): copies
        ({"decoding": {"temperature": 0.7}}, True),  # sampled
        ({"prefix_sharing": False}, True),  # the reference path computes every request
    ],
)
def test_hf_measures_replicates_exactly_when_it_does_not_copy_answers(
    tiny_model_dir, tmp_path, extra, measures
):
    backend = HFBackend(tiny_hf_config(tiny_model_dir, tmp_path, max_new_tokens=2, **extra))
    assert backend.measures_replicates is measures and measures_replicates(backend) is measures
    # the property reads the very condition under which equal inputs are computed once
    ids = [[1, 2, 3]] * 3
    requests = [Request((("user", "x"),), seed=s) for s in range(3)]
    first = backend._first_equal(backend._inputs(requests, ids, [2] * 3))
    assert first == ([0, 1, 2] if measures else [0, 0, 0])
    why = floor_not_measured("tiny", backend)
    assert (why is None) is measures
    if why:
        assert why == (
            "floor 0 by construction — not measured: tiny's backend (transformers, greedy with "
            "shared prefixes) answers the K replicates as copies of one computation; serve the "
            "model or sample (docs/suites/order.md)"
        )


def test_replay_and_undeclared_backends_measure(tmp_path):
    recording = tmp_path / "r.jsonl"
    recording.write_text("")
    replay = ReplayBackend({"id": "rec", "source": {"path": str(recording)}})
    assert replay.measures_replicates is True and measures_replicates(replay)
    assert measures_replicates(ScriptedBackend())  # declares nothing: each request its own
    assert floor_not_measured("scripted", ScriptedBackend()) is None


# -- a control that does not measure -------------------------------------------------------------
def test_a_greedy_hf_control_is_not_measured_not_applicable_and_labelled(tiny_model_dir, tmp_path):
    auditor = hf_auditor(tiny_model_dir, tmp_path)
    th = thresholds_dir(tmp_path)
    facet_verdicts = gated(OrderCell(auditor, th, FACET, "tiny", DATASET))
    assert {v.threshold for v in facet_verdicts} == {"flip_rate <= 1.0 (point)"}
    computed = count_computed(auditor.backend("tiny"))  # type: ignore[arg-type]
    copies_before = auditor.backend("tiny").answer_copies  # type: ignore[attr-defined]
    with pytest.raises(pytest.skip.Exception) as skipped:
        OrderCell(auditor, th, CONTROL, "tiny", DATASET).run()
    # and counted as such: every replicate a copy, none computed (the run's calls line says so)
    copies = auditor.backend("tiny").answer_copies - copies_before  # type: ignore[attr-defined]
    assert copies == N_ITEMS * auditor.config.k
    assert str(skipped.value.msg) == NOT_APPLICABLE + floor_not_measured(
        "tiny", auditor.backend("tiny")
    )
    # the copies are free: every replicate is the facet's canonical ordering, answered before
    assert computed == []
    store = auditor.store
    # its thresholds gave no verdict (not applicable, never a pass); the facet's are kept
    verdicts = store.verdicts("tiny", DATASET)
    assert [v.facet for v in verdicts] == [FACET]
    # its summaries are recorded and labelled; a measured facet's are not
    stored = store.cell_summaries("tiny", DATASET)
    summaries = stored[CONTROL]
    assert set(summaries) == {"letter_logprob", "regex"}
    for s in summaries.values():
        assert s.floor == NOT_MEASURED_FLOOR
        assert s.n_items == N_ITEMS and "floor" in s.model_dump(mode="json")
    assert all(s.floor is None for s in stored[FACET].values())
    assert all("floor" not in s.model_dump(mode="json") for s in stored[FACET].values())
    # copies never flip (the random model's regex reads no label: its flip rate is undefined)
    assert summaries["letter_logprob"].metrics["flip_rate"].estimate == 0.0
    # Δ_order is the facet's flip rate against the constructed floor
    facet_flip = stored[FACET]["letter_logprob"].metrics["flip_rate"].estimate
    assert summaries["letter_logprob"].metrics["delta_order"].estimate == pytest.approx(facet_flip)

    card = build_card(store, "tiny", DATASET, "r1", n_boot=200, suites=SUITES).to_data()
    block = card["controls"][CONTROL]
    assert all(m["floor"] == NOT_MEASURED_FLOOR for m in block.values())
    assert "floor" not in card["order_robustness"][FACET]["letter_logprob"]
    assert [v["facet"] for v in card["thresholds"]] == [FACET]
    markdown = card_markdown(card, SUITES)
    assert markdown.count("(floor 0 by construction (not measured))") == 2  # Δ_order, 2 readouts
    assert f"Floor not measured ({CONTROL})" in markdown

    # a regression comparison of such a control still reads its trials
    record = RunRecord.open(store.path.parent)
    arm = record.arm("tiny", CONTROL, DATASET)
    assert arm is not None and arm.perm is not None
    cmp = compare_cell(arm, arm, CONTROL, DATASET, "letter_logprob", n_boot=200)
    deltas = cmp.primary.deltas
    assert deltas["delta_flip_rate"].estimate == 0.0
    assert deltas["delta_delta_order"].estimate == 0.0
    assert deltas["delta_delta_order"].n_items == N_ITEMS


def test_a_sequential_greedy_control_decides_nothing_and_holds_nothing(tiny_model_dir, tmp_path):
    auditor = hf_auditor(tiny_model_dir, tmp_path, sequential=True)
    trials, perm = order_cells(auditor).cell_trials("tiny", DATASET, CONTROL)
    facet_stop = order_cells(auditor).stop("tiny", DATASET, FACET)
    control_stop = order_cells(auditor).stop("tiny", DATASET, CONTROL)
    assert facet_stop is not None and control_stop is not None
    assert facet_stop.held_by == []  # the control's thresholds held the facet for nothing
    assert control_stop.reason == "nothing to decide" and control_stop.thresholds == []
    # it draws exactly its facet's items, so Δ_order stays paired on all of them
    assert control_stop.n_items == facet_stop.n_items == N_ITEMS
    assert set(trials["item_id"]) == set(perm["item_id"])
    assert auditor.store.records(SequentialStop, "tiny")


# -- controls that measure gate as before --------------------------------------------------------
@pytest.mark.filterwarnings("ignore::flipgate.suite.cell_loop.InconclusiveThreshold")
def test_a_sampled_hf_control_computes_every_replicate_and_is_gated(tiny_model_dir, tmp_path):
    auditor = hf_auditor(tiny_model_dir, tmp_path, decoding={"temperature": 1.0})
    th = thresholds_dir(tmp_path)
    gated(OrderCell(auditor, th, FACET, "tiny", DATASET))
    computed = count_computed(auditor.backend("tiny"))  # type: ignore[arg-type]
    cell = OrderCell(auditor, th, CONTROL, "tiny", DATASET)
    try:
        verdicts = gated(cell)
    except pytest.fail.Exception:  # a random model's sampled answers may well flip: gated
        verdicts = [v for v in auditor.store.verdicts("tiny", DATASET) if v.facet == CONTROL]
    assert len(computed) == N_ITEMS * K  # each replicate its own computation
    assert {v.threshold for v in verdicts} == {
        "flip_rate[facet=same_ordering] <= 0.05 (lower)",
        "delta_order[facet=same_ordering] <= 1.0 (point)",
    }
    stored = auditor.store.cell_summaries("tiny", DATASET)[CONTROL]
    assert set(stored) == {"letter_logprob", "regex"}
    assert all(s.floor is None for s in stored.values())


def test_a_measuring_control_that_flips_fails_its_gate(tmp_path):
    """The scripted double answers by the replicate's seed: its control flips on every item, and
    ``flip_rate <= 0.05 (upper)`` fails (a gate that can fail, unlike a copied floor)."""

    def by_seed(req):
        return req.labels[req.seed % len(req.labels)]

    auditor = make_auditor(tmp_path, ScriptedBackend(rule=by_seed))
    th = thresholds_dir(
        tmp_path,
        "thresholds:\n  - {metric: flip_rate, facet: same_ordering, max: 0.05, rule: upper}\n",
    )
    with pytest.raises(pytest.fail.Exception):
        gated(OrderCell(auditor, th, CONTROL, "scripted", "arc_challenge"))
    (verdict,) = auditor.store.verdicts("scripted", "arc_challenge")
    assert verdict.facet == CONTROL and verdict.verdict == "fail"
    s = auditor.store.cell_summaries("scripted", "arc_challenge")[CONTROL]["regex"]
    assert s.metrics["flip_rate"].estimate == 1.0 and s.floor is None
