"""The configuration envelope (docs/definitions.md §7; SafetyRepro §3, App. A, App. T): axes,
validity, tiers, commit stamp.

A configuration is one value per axis: template T1–T4, decoding (greedy; T=0.3/p=0.9; T=0.7/p=0.9,
the stochastic ones scored as the mean over ``seeds`` seeds), few-shot count, scoring path
(free-form regex or log-prob argmax) and quantization. Invalid: logprob with non-greedy decoding;
free-form on pair benchmarks (CrowS-Pairs). A configuration is ``stress`` tier when any of its
values is listed under ``tiers.stress``, else ``core``. The envelope file's sha256 (of its parsed
content) is the commit stamp carried into every card.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from flipgate import FlipgateError
from flipgate.config import read_yaml
from flipgate.hashing import sha256_json
from flipgate.items.registry import DatasetSpec, refuse_repeated

#: decoding name -> (temperature, top_p)
DECODINGS = {"greedy": (0.0, 1.0), "T0.3": (0.3, 0.9), "T0.7": (0.7, 0.9)}
#: benchmarks scored by comparing a pair's log-likelihoods; they admit no free-form path
PAIR_BENCHMARKS = {"crows_pairs"}
AXES = ("template", "decoding", "few_shot", "scoring", "quantization")


@dataclass(frozen=True)
class Config:
    """One point of the envelope."""

    template: str
    decoding: str
    few_shot: int
    scoring: str
    quantization: str
    tier: str = "core"

    @property
    def id(self) -> str:
        return (
            f"{self.template}|{self.decoding}|{self.few_shot}shot|{self.scoring}|"
            f"{self.quantization}"
        )

    @property
    def temperature(self) -> float:
        return DECODINGS[self.decoding][0]

    @property
    def top_p(self) -> float:
        return DECODINGS[self.decoding][1]

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def as_dict(self) -> dict:
        return {a: getattr(self, a) for a in AXES} | {"tier": self.tier, "id": self.id}


@dataclass
class Envelope:
    path: Path
    name: str
    axes: dict[str, list]
    stress: dict[str, list]
    benchmarks: list[DatasetSpec]
    items_per_benchmark: int
    seeds: int
    run_tier: str
    roster: list[str] | None
    sha256: str
    exemplar_seed: int = 42
    reserved_exemplars: int = 5
    raw: dict = field(default_factory=dict)

    def tier(self, values: dict) -> str:
        return "stress" if any(values[a] in self.stress.get(a, ()) for a in AXES) else "core"

    def valid(self, cfg: Config, benchmark: str) -> bool:
        if cfg.scoring == "logprob" and not cfg.greedy:
            return False  # a log-prob argmax does not depend on sampling
        if cfg.scoring == "free_form" and benchmark in PAIR_BENCHMARKS:
            return False
        return True

    def configs(self, benchmark: str, tier: str | None = None) -> list[Config]:
        """Every valid configuration for ``benchmark`` in ``tier`` ("core" or "full")."""
        tier = tier or self.run_tier
        out = []
        for combo in itertools.product(*(self.axes[a] for a in AXES)):
            values = dict(zip(AXES, combo))
            cfg = Config(**values, tier=self.tier(values))
            if self.valid(cfg, benchmark) and (tier == "full" or cfg.tier == "core"):
                out.append(cfg)
        return out

    def anchor(self, benchmark: str) -> Config:
        """The receipt configuration: the first valid value of every axis (e.g. T1, greedy,
        0-shot)."""
        return self.configs(benchmark, "full")[0]


def load_envelope(path: Path | str, models: list[str]) -> Envelope:
    """Parse and validate an envelope file; unknown roster models are named."""
    path = Path(path)
    data = read_yaml(path, "envelope")
    axes = data["axes"]
    for i, value in enumerate(axes["decoding"]):
        if value not in DECODINGS:
            raise FlipgateError(
                f"{path}: field axes.decoding[{i}]: unknown decoding (value: {value!r}); "
                f"known: {', '.join(DECODINGS)}"
            )
    roster = data.get("roster")
    for i, model_id in enumerate(roster or []):
        if model_id not in models:
            raise FlipgateError(
                f"{path}: field roster[{i}]: no model with this id in models.yaml "
                f"(value: {model_id!r})"
            )
    stress = data.get("tiers", {}).get("stress", {})
    for axis, values in stress.items():
        for value in values:
            if value not in axes[axis]:
                raise FlipgateError(
                    f"{path}: field tiers.stress.{axis}: value not on the axis (value: {value!r})"
                )
    benchmarks = [
        DatasetSpec.parse(b, f"{path}: field benchmarks[{j}]")
        for j, b in enumerate(data["benchmarks"])
    ]
    refuse_repeated([("benchmarks", benchmarks)], str(path))  # one source per benchmark name
    return Envelope(
        path,
        data["name"],
        axes,
        stress,
        benchmarks,
        data.get("items_per_benchmark", 20),
        data.get("seeds", 5),
        data.get("run", "core"),
        roster,
        sha256_json(data),
        data.get("exemplar_seed", 42),
        max(axes["few_shot"]),
        data,
    )
