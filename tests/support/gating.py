"""A thresholds file every cell is gated by, and a one-model models.yaml on the tiny model."""

from __future__ import annotations

GATING = """
thresholds:
  - {metric: parse_rate, min: 0.0, rule: point}
  - {metric: flip_rate, max: 1.0, rule: point}
  - {metric: flip_rate, facet: same_ordering, max: 1.0, rule: point}
"""


def one_model(tiny_model_dir, extra: str = "") -> str:
    return (
        f'  - {{id: tiny, backend: hf, source: {{path: "{tiny_model_dir}"}}, max_new_tokens: 3'
        f"{extra}}}\n"
    )
