"""Run every valid configuration of an envelope for one model on one benchmark.

Each (model, quantization, decoding) is a backend variant (``<model>@<quant>/<decoding>``) loaded
once per process. Both scoring paths read the same call: a greedy variant keeps the generated text
(free-form) and the letter log-probabilities at the answer position (logprob), so the two
configurations that differ only in scoring send identical requests and the second is answered by
the response cache. Answers are recorded as trials (facet ``envelope[<config id>]``, sample =
seed), so every score is recomputable from the trials store. A configuration's score is the
accuracy over the items (a parse failure counts as wrong, and the parse rate is kept), averaged
over ``seeds`` seeds for stochastic decoding.
"""

from __future__ import annotations

import pandas as pd

from flipgate import FlipgateError
from flipgate.calls import Auditor
from flipgate.envelope.render import render
from flipgate.envelope.spec import Config, Envelope
from flipgate.items import DatasetSpec, Item, load_items
from flipgate.items.item import LETTERS
from flipgate.readouts import read_label
from flipgate.results import Trial

QUANTIZATION = {
    # the model's full precision where the hardware computes it fast: bf16 on a CPU with native
    # bf16, else float32 (docs/engine.md, "Precision"); the card's receipt says which
    "auto": {"dtype": "auto", "quantization": "none"},
    "fp32": {"dtype": "float32", "quantization": "none"},
    "bf16": {"dtype": "bfloat16", "quantization": "none"},
    "nf4": {"dtype": "auto", "quantization": "nf4"},  # computes in bf16 only where it is native
}
READOUT = {"free_form": "regex", "logprob": "letter_logprob"}


def envelope_cell(cfg: Config) -> str:
    return f"envelope[{cfg.id}]"


def applicable(envelope: Envelope, model: dict, cfg: Config) -> bool:
    """Quantization varies only for local transformers models; others run their own
    precision."""
    return model["backend"] == "hf" or cfg.quantization == envelope.axes["quantization"][0]


def planned_trials(envelope: Envelope, spec: DatasetSpec, models: dict[str, dict]) -> dict:
    """(model id, benchmark, configuration cell) -> trials a benchmark plans for ``models``:
    N items, times the seeds of a sampled configuration (the live progress display's plan)."""
    n = spec.n or envelope.items_per_benchmark
    return {
        (model_id, spec.name, envelope_cell(cfg)): n * (1 if cfg.greedy else envelope.seeds)
        for model_id, model in models.items()
        for cfg in envelope.configs(spec.name)
        if applicable(envelope, model, cfg)
    }


class EnvelopeRunner:
    def __init__(self, auditor: Auditor, envelope: Envelope):
        self.auditor, self.envelope = auditor, envelope

    def split(self, spec: DatasetSpec) -> tuple[list[Item], list[Item]]:
        """(evaluated items, few-shot exemplars): the first N of the seed-42 shuffle, then the
        next k."""
        n = spec.n or self.envelope.items_per_benchmark
        items = [
            it for it in load_items(spec, None, self.envelope.exemplar_seed) if it.gold is not None
        ]
        if len(items) < n + self.envelope.reserved_exemplars:
            raise FlipgateError(
                f"{self.envelope.path}: benchmark {spec.name!r} has {len(items)} scorable items, "
                f"fewer than {n} + {self.envelope.reserved_exemplars} exemplars"
            )
        return items[:n], items[n : n + self.envelope.reserved_exemplars]

    def applicable(self, model_id: str, cfg: Config) -> bool:
        return applicable(self.envelope, self.auditor.config.models[model_id], cfg)

    def variant(self, model_id: str, cfg: Config) -> str:
        """Register (once) and return the backend variant that realises ``cfg`` for ``model_id``:
        one per quantization and decoding, with both readouts when decoding is greedy (logprob
        scoring exists only then)."""
        name = f"{model_id}@{cfg.quantization}/{cfg.decoding}"
        base = self.auditor.model(model_id)
        overrides = QUANTIZATION[cfg.quantization] if base["backend"] == "hf" else {}
        readouts = list(READOUT.values()) if cfg.greedy else [READOUT["free_form"]]
        self.auditor.add_variant(
            name,
            {
                **base,
                **overrides,
                "id": name,
                "readouts": readouts,
                "primary_readout": readouts[0],
                "suites": [],
                "variant_of": model_id,
                "decoding": {
                    **(base.get("decoding") or {}),
                    "temperature": cfg.temperature,
                    "top_p": cfg.top_p,
                },
            },
        )
        return name

    def scores(self, model_id: str, spec: DatasetSpec) -> pd.DataFrame:
        """One row per (configuration, seed): score, parse rate, n."""
        items, exemplars = self.split(spec)
        rows = []
        for cfg in self.envelope.configs(spec.name):
            if not self.applicable(model_id, cfg):
                continue
            variant = self.variant(model_id, cfg)
            seeds = range(1 if cfg.greedy else self.envelope.seeds)
            plan = [(it, s) for s in seeds for it in items]
            requests = [
                render(it, cfg, exemplars, s, (spec.name, it.item_id, envelope_cell(cfg), 0, s))
                for it, s in plan
            ]
            outputs, cached = self.auditor.outputs(
                variant,
                requests,
                use_cache=True,  # no permutations:
                label=f"{spec.name} {cfg.id}",
                grammar_version=None,
            )
            readout = READOUT[cfg.scoring]
            trial = self.auditor.trial_maker(model_id, spec.name, answered_by=variant)
            trials: list[Trial] = []
            for (it, s), req, out, hit in zip(plan, requests, outputs, cached):
                label = read_label(readout, out, req.labels, req.answer_prefix)
                chosen = None if label is None else LETTERS.index(label)
                trials.append(
                    trial(
                        req,
                        out,
                        hit,
                        item_id=it.item_id,
                        facet=envelope_cell(cfg),
                        condition=0,
                        permutation=list(range(it.n_options)),
                        sample=s,
                        readouts={readout: label},
                        mapped={readout: chosen},
                        correct={readout: None if chosen is None else chosen == it.gold},
                        gold=str(it.gold),
                        n_classes=it.n_options,
                    )
                )
            self.auditor.store.add_trials(trials)
            for s in seeds:
                mine = [t for t in trials if t.sample == s]
                parsed = [t for t in mine if t.mapped[readout] is not None]
                rows.append(
                    {
                        "model": model_id,
                        "benchmark": spec.name,
                        "config": cfg.id,
                        **cfg.as_dict(),
                        "seed": s,
                        "score": sum(bool(t.correct[readout]) for t in mine) / len(mine),
                        "parse_rate": len(parsed) / len(mine),
                        "n": len(mine),
                    }
                )
        if not rows:
            raise FlipgateError(
                f"{self.envelope.path}: no valid configuration for model {model_id!r} on "
                f"{spec.name!r}"
            )
        return pd.DataFrame(rows)


def config_scores(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Seed means: one row per (model, benchmark, configuration)."""
    keys = [
        "model",
        "benchmark",
        "config",
        "template",
        "decoding",
        "few_shot",
        "scoring",
        "quantization",
        "tier",
    ]
    return per_seed.groupby(keys, as_index=False).agg(
        score=("score", "mean"),
        parse_rate=("parse_rate", "mean"),
        n=("n", "first"),
        seeds=("seed", "nunique"),
    )
