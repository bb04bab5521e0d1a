"""The judge consensus suite's names: its cell."""

#: the judge consensus suite's name, which is also its cells' name: ``facet: judges`` in thresholds
#: (``facet: judge``, its former name, is still read) and the trials' facet
JUDGE_CELL = "judges"
