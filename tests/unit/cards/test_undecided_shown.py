"""An undecided verdict shows why wherever its label is shown (docs/definitions.md §12.8): the
card's Markdown, the Allure step line, the terminal line."""

from flipgate.cards.markdown import verdict_text
from flipgate.config import Threshold
from flipgate.gate.rules import decided_line, evaluate
from flipgate.metrics.sequential import ItemValues
from flipgate.order.allure import verdict_line
from flipgate.results import MetricEstimate

WHY = "under-powered: 5 items would decide it (cap 2)"


def undecided_verdict():
    t = Threshold("accuracy", 0.5, "min", "upper")
    values = ItemValues.of([1.0, 1.0], kind="binary")
    estimates = {"r": {"accuracy": MetricEstimate(estimate=1.0)}}
    (v,) = evaluate([t], estimates, "r", sequences={("r", "accuracy"): values})
    return v


def test_card_markdown_allure_and_terminal_show_the_reason():
    v = undecided_verdict()
    assert verdict_text(v.model_dump()) == f"**inconclusive** ({WHY}) → fail"
    assert verdict_line(v, {}) == f"accuracy >= 0.5 (upper): inconclusive ({WHY})"
    assert WHY in v.describe()


def test_the_run_line_counts_decided_and_undecided_by_reason():
    v = undecided_verdict()
    t = Threshold("flip_rate", 0.2, "max", "lower")
    est = MetricEstimate(estimate=0.1, ci=(0.05, 0.15), n_items=40)
    (decided,) = evaluate([t], {"r": {"flip_rate": est}}, "r")
    far = MetricEstimate(estimate=0.21, ci=(0.1, 0.3), n_items=40)
    (at_bound,) = evaluate([t], {"r": {"flip_rate": far}}, "r")  # n* = 40·(0.11/0.01)² + 1
    assert at_bound.undecided is not None and at_bound.undecided.n_star == 4841
    assert decided_line([v, decided, at_bound]) == (
        "decided 1 of 3 lower/upper verdicts; undecided: 1 under-powered (n* ≤ 10 × the cap), "
        "1 at their bound"
    )
    assert decided_line([]) is None
