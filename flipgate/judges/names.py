"""The judge consensus suite's names: its cell."""

#: the judge consensus cell's name (``facet: judge`` in thresholds, the trials' facet)
JUDGE_CELL = "judge"
