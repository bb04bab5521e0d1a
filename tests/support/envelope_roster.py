"""A planted envelope roster: a good model and two that favour one template."""

from __future__ import annotations

from flipgate.calls import Auditor, Paths
from flipgate.config import AuditConfig
from flipgate.envelope.cell import EnvelopeCell
from flipgate.envelope.spec import load_envelope
from flipgate.items import DatasetSpec, load_items
from support.paths import write
from support.scripted import ScriptedBackend

SMALL = """
name: test-envelope
benchmarks: [arc_easy]
items_per_benchmark: 6
axes:
  template: [T1, T3]
  decoding: [greedy]
  few_shot: [0, 3]
  scoring: [free_form, logprob]
  quantization: [fp32]
"""


def planted(gold: dict, favourite: str | None):
    """Right iff the prompt uses template ``favourite`` (always right when None), else a wrong
    label."""

    def rule(req):
        item_text = req.messages[0][1].split("\n\n")[-1]
        right = next(g for q, g in gold.items() if q in item_text)
        is_t3 = "\nOptions:" in item_text
        ok = favourite is None or (favourite == "T3") == is_t3
        return right if ok else next(lab for lab in req.labels if lab != right)

    return rule


def planted_roster_cell(tmp_path):
    """An envelope cell over the planted roster (good, t1fan, t3fan), and its folder."""
    envelope = load_envelope(write(tmp_path / "env.yaml", SMALL), ["good", "t1fan", "t3fan"])
    items = load_items(DatasetSpec("arc_easy"), None, 42)
    gold = {it.question.strip(): "ABCDE"[it.gold] for it in items[:6]}
    backends = {
        m: ScriptedBackend(m, planted(gold, fav))
        for m, fav in (("good", None), ("t1fan", "T1"), ("t3fan", "T3"))
    }
    models = {
        m: {
            "id": m,
            "backend": "scripted",
            "readouts": ["regex"],
            "primary_readout": "regex",
            "suites": ["envelope"],
        }
        for m in backends
    }
    cfg = AuditConfig(tmp_path / "models.yaml", models, bootstrap_n=200)
    auditor = Auditor(
        cfg,
        "r1",
        Paths(
            tmp_path / "trials.sqlite",
            tmp_path / "cache.sqlite",
            tmp_path / "manifests",
            tmp_path / "models",
        ),
        progress=False,
    )
    auditor.backend = lambda variant: backends[variant.split("@")[0]]
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        """
thresholds:
  - {metric: rho_flip_max, facet: envelope, max: 0.25, rule: point}
  - {metric: cfr@0.5, facet: envelope, max: 0.6, rule: point}
  - {metric: flip_rate, max: 0.1}
""",
    ).parent
    return EnvelopeCell(auditor, str(thresholds), envelope, envelope.benchmarks[0]), tmp_path
