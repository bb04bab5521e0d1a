"""docs/definitions.md §10 estimators: DSE on planted clusters, FESTA against hand-computed
values, the log-prob entropy; all in [0, 1]."""

import math

import pytest

from flipgate.continuity.estimators import (
    answer_probabilities,
    cluster_key,
    dse,
    festa,
    logprob_uncertainty,
)


def test_dse_on_planted_clusters():
    assert dse(["left"] * 10) == 0.0
    # two clusters of 5: ln 2 / ln 10
    assert dse(["left"] * 5 + ["right"] * 5) == pytest.approx(math.log(2) / math.log(10))
    # every sample its own cluster: 1
    assert dse([f"?{i}" for i in range(6)]) == pytest.approx(1.0)
    # 6 / 3 / 1 by hand
    h = -(0.6 * math.log(0.6) + 0.3 * math.log(0.3) + 0.1 * math.log(0.1))
    keys = ["3"] * 6 + ["4"] * 3 + ["?banana"]
    assert dse(keys) == pytest.approx(h / math.log(10))


def test_semantic_clusters_merge_spellings_of_one_answer():
    keys = [cluster_key("left", "Left."), cluster_key("left", "the cup is on the left")]
    assert keys == ["left", "left"]
    assert cluster_key(None, "I don't know!") == cluster_key(None, "i don't  know")
    assert cluster_key(None, "maybe") != cluster_key(None, "perhaps")


def test_festa_hand_computed():
    # every equivalent answer is y0 and every complement flips: 0
    assert festa("left", ["left"] * 4, ["right"] * 4) == 0.0
    # none agrees anywhere: 1
    assert festa("left", ["right"] * 4, ["left"] * 4) == pytest.approx(1.0)
    # half the equivalents agree, every complement flips: (-ln 0.5 / ln 5) / 2
    assert festa("left", ["left", "right"] * 2, ["right"] * 4) == pytest.approx(
        math.log(2) / math.log(5) / 2
    )
    # no complements (counting): the equivalent part alone
    assert festa("3", ["3", "3", "4", "3"], []) == pytest.approx(-math.log(0.75) / math.log(5))
    # an unparsable complement is not a flip; an unparsable y0 agrees with nothing
    assert festa("left", ["left"] * 2, [None, None]) == pytest.approx(0.5)
    assert festa(None, [None, None], ["left", "right"]) == pytest.approx(0.5)


def test_logprob_uncertainty_sums_spellings():
    spellings = {"left": ("left", "Left"), "right": ("right", "Right")}
    lp = {"left": math.log(0.2), "Left": math.log(0.2), "right": math.log(0.4)}
    probs = answer_probabilities(lp, spellings)
    assert probs == pytest.approx({"left": 0.5, "right": 0.5})
    assert logprob_uncertainty(probs) == pytest.approx(1.0)
    assert logprob_uncertainty({"left": 1.0, "right": 0.0}) == 0.0
    assert answer_probabilities({"left": -1.0}, spellings) == "no log-prob for answer(s) ['right']"
