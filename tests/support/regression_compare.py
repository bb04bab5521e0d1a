"""Planted trial tables and arms for comparing two model versions cell by cell."""

from __future__ import annotations

import itertools

import pandas as pd

from flipgate.regression.compare import Arm, compare_cell

R = "regex"


#: canonical ordering first (condition 0), then distinct non-canonical permutations of 4 options

PERMS = list(itertools.permutations(range(4)))


FACET, CONTROL, DATASET = "option_order", "same_ordering:option_order", "mmlu"


SHA = "a" * 64


def make_trials(
    answers: dict[str, list],
    gold: dict[str, int] | int = 0,
    readouts=(R,),
    perms=None,
    same_ordering: bool = False,
    unparsed_correct=False,
) -> pd.DataFrame:
    """One trial per (item, ordering): ``answers[item][k]`` is the content label read at ordering k
    (None: unparsed). ``perms[(item, k)]`` overrides ordering k's permutation; ``same_ordering``
    repeats the canonical one (the same-ordering control). An unparsed answer's ``correct`` is
    ``unparsed_correct`` (the pipeline stores False; None must count as wrong too)."""
    perms = perms or {}
    rows = []
    for item, answer_list in answers.items():
        g = gold[item] if isinstance(gold, dict) else gold
        for k, a in enumerate(answer_list):
            perm = perms.get((item, k), PERMS[0] if same_ordering else PERMS[k])
            ok = unparsed_correct if a is None else a == g
            rows.append(
                {
                    "item_id": item,
                    "condition": k,
                    "permutation": list(perm),
                    "sample": 0,
                    "mapped": {r: a for r in readouts},
                    "correct": {r: ok for r in readouts},
                    "n_classes": 4,
                }
            )
    return pd.DataFrame(rows)


def arm(model_id, answers, readouts=(R,), sha=SHA, perm=None, **kw) -> Arm:
    return Arm(model_id, make_trials(answers, readouts=readouts, **kw), tuple(readouts), sha, perm)


def compare(base: Arm, cand: Arm, cell=FACET, **kw):
    kw.setdefault("n_boot", 500)
    return compare_cell(base, cand, cell, DATASET, R, **kw)
