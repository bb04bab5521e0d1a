"""Judge order-robustness (docs/definitions.md §9; PCFJudge): per judge model × candidate-set
dataset, the judge runs over K predetermined orderings of each set; judge flip rate, direct
(canonical ordering) vs permutation-consensus accuracy with a paired CI, improved / regressed
items and the exact sign test, and the majority-vote bound next to the observed error."""

SUITE = "judges"


def test_judges(flipgate_cell):
    flipgate_cell.run()
