"""The golden audit's plan (tests/integration/test_golden_cards.py; benchmarks/card_build.py times
it): two recorded tiny models, their thresholds and models.yaml."""

from __future__ import annotations

from pathlib import Path

from support.paths import REPO, write

GOLDEN = REPO / "tests" / "golden"
THRESHOLDS = """
level: 0.95
thresholds:
  - {metric: parse_rate, min: 0.5, rule: upper}
  - {metric: flip_rate, max: 0.6, rule: lower}
  - {metric: pairwise_disagreement, max: 0.3, rule: warn}
  - {metric: accuracy, min: 0.2, rule: point, readout: regex}
  - {metric: flip_rate, facet: same_ordering, max: 0.5, rule: upper}
  - {metric: delta_order, facet: same_ordering, max: 0.2, rule: lower}
  - {metric: delta_flip_rate, vs: baseline, max: 0.1, rule: lower}
  - {metric: delta_accuracy, vs: baseline, min: -0.1, rule: lower}
  - {metric: delta_delta_order, vs: baseline, facet: same_ordering, max: 0.1, rule: lower}
"""


def models_yaml(path: Path, v1: str, v2: str) -> Path:
    """Two versions of a model (v2 names v1 as its baseline) on two multiple-choice datasets and
    the synthetic multi-hop passages, with both readouts."""
    return write(
        path,
        f"""
audit:
  k: 6
  items_per_dataset: 4
  sequential: false        # the recorded audit is fixed N: its gates are the §5 bootstrap ones
  bootstrap: {{n: 200}}
  facets:
    option_order: {{datasets: [arc_challenge, commonsense_qa]}}
    evidence_chunk_order: {{datasets: [synthetic_multihop]}}
models:
  - {{id: tiny-v1, {v1}, readouts: [letter_logprob, regex], max_new_tokens: 4}}
  - {{id: tiny-v2, {v2}, readouts: [letter_logprob, regex], max_new_tokens: 4,
     baseline: tiny-v1}}
""",
    )
