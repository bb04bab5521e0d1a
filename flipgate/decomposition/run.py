"""Trials of one decomposition cell: items, the axis's variants (manifested), one call per
variant, every readout of every answer."""

from __future__ import annotations

import json

import pandas as pd

from flipgate import FlipgateError
from flipgate.axes import Axis, Variant, get_axis
from flipgate.axes.formats import FORMATS
from flipgate.calls import Auditor
from flipgate.decomposition.plan import DecompositionPlan
from flipgate.files import atomic_write
from flipgate.hashing import sha256_json
from flipgate.items import DatasetSpec, Item, load_items
from flipgate.judging.choice import choice_requests, choices
from flipgate.paraphrases import ParaphraseStore
from flipgate.readouts import read_label
from flipgate.results import trials_frame

#: the readouts each backend kind can give besides regex
CAPABLE = {
    "letter_logprob": lambda model: "letter_logprob" in model["readouts"],
    "cloze": lambda model: model["backend"] == "hf",
    "judge": lambda model: True,  # any model's replies can be judged (behind the judge gate)
}


def axis_cell(axis: str) -> str:
    """The trials-store cell of an axis: ``axis[label_set]``."""
    return f"axis[{axis}]"


def decomposable(item: Item) -> bool:
    """Text multiple choice with a gold option and at most 10 options (the label sets' size)."""
    return item.gold is not None and 2 <= item.n_options <= 10 and not item.images


class DecompositionRunner:
    def __init__(self, auditor: Auditor, plan: DecompositionPlan, paraphrases: ParaphraseStore):
        self.auditor, self.plan, self.paraphrases = auditor, plan, paraphrases

    def items(self, spec: DatasetSpec) -> list[Item]:
        """The first N decomposable items of the seed's shuffle (``--items-per-dataset``, else
        the dataset's ``n``, else ``items_per_dataset`` of ``audit.decomposition``)."""
        n = self.auditor.n_override or spec.n or self.plan.n_items
        items = load_items(spec, n, self.auditor.config.seed, keep=decomposable)
        if len(items) < 2:
            raise FlipgateError(
                f"dataset {spec.name!r}: {len(items)} text multiple-choice item(s) with a gold "
                "option; the decomposition needs at least 2"
            )
        return items

    def readouts(self, model_id: str) -> tuple[list[str], dict[str, str]]:
        """(readouts this model gives, {readout: why not} for the plan's others)."""
        model = self.auditor.model(model_id)
        usable, missing = ["regex"], {}
        for r in self.plan.readouts[1:]:
            if CAPABLE[r](model):
                usable.append(r)
            else:
                missing[r] = f"model {model_id!r} ({model['backend']}) gives no {r} readout" + (
                    " (declare it in its readouts:)" if r == "letter_logprob" else ""
                )
        return usable, missing

    def judge_id(self, model_id: str) -> str:
        """The judge readout's judge: ``judge.model``, else ``audit.judge``, else the model."""
        return self.plan.judge_model or self.auditor.config.judge or model_id

    def judged(self, model_id: str, dataset: str, cell: str, shown: list, outputs: list) -> list:
        """The judge's label for each (item, variant, request) of ``shown`` and its output."""
        cfg = self.auditor.config
        groups = [
            choice_requests(
                v.question or it.question,
                req.labels,
                [it.options[s] for s in v.perm],
                req.answer_prefix + out.text,
                cfg.judge_consensus,
                cfg.seed,
                key=(dataset, it.item_id, f"judge:{cell}", v.condition, 0),
            )
            for (it, v, req), out in zip(shown, outputs)
        ]
        return choices(
            self.auditor,
            self.judge_id(model_id),
            groups,
            cfg.judge_consensus,
            f"judge {cell}/{dataset}",
        )

    def axis(self, name: str) -> Axis:
        return get_axis(name, self.paraphrases, f"{self.auditor.config.path}: audit.decomposition")

    def manifest(self, spec: DatasetSpec, axis: str, shown: dict[str, list[Variant]]) -> str:
        """Write what each item is shown on ``axis`` (fixtures/manifests/axes); return its
        sha256."""
        seed = self.auditor.config.seed
        body = axis_manifest(axis, spec.name, seed, shown)
        path = self.auditor.paths.manifests / "axes" / f"{axis}__{spec.name}__s{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(body, indent=1, sort_keys=True) + "\n")
        k = max(len(v) for v in shown.values())
        self.auditor.store.add_manifest(axis_cell(axis), spec.name, k, body["sha256"], str(path))
        return body["sha256"]

    def trials(
        self, model_id: str, spec: DatasetSpec, axis_name: str, readouts: list[str] | None = None
    ) -> pd.DataFrame:
        """One trial per (item, variant), every readout read from the same output (``readouts``:
        default, every one the model gives; the judge's come from a second call per trial)."""
        axis = self.axis(axis_name)
        readouts = readouts or self.readouts(model_id)[0]
        items = self.items(spec)
        shown = {it.item_id: axis.variants(it) for it in items}
        self.manifest(spec, axis_name, shown)
        cell = axis_cell(axis_name)
        plan = [(it, v) for it in items for v in shown[it.item_id]]
        requests = [
            v.render(it, (spec.name, it.item_id, cell, v.condition, 0), "cloze" in readouts)
            for it, v in plan
        ]
        self.auditor.store.set_planned(model_id, spec.name, cell, len(plan))
        outputs, cached = self.auditor.outputs(
            model_id, requests, use_cache=True, label=f"{cell}/{spec.name}"
        )
        trial = self.auditor.trial_maker(model_id, spec.name)
        judged = (
            self.judged(
                model_id, spec.name, cell, [(*p, r) for p, r in zip(plan, requests)], outputs
            )
            if "judge" in readouts
            else [None] * len(plan)
        )
        trials = []
        for (it, v), req, out, hit, by_judge in zip(plan, requests, outputs, cached, judged):
            labels = {
                r: by_judge if r == "judge" else read_label(r, out, req.labels, req.answer_prefix)
                for r in readouts
            }
            mapped = {r: v.map_back(label, it) for r, label in labels.items()}
            trials.append(
                trial(
                    req,
                    out,
                    hit,
                    item_id=it.item_id,
                    facet=cell,
                    condition=v.condition,
                    permutation=list(v.perm),
                    sample=0,
                    readouts=labels,
                    mapped=mapped,
                    correct={r: None if m is None else m == it.gold for r, m in mapped.items()},
                    gold=str(it.gold),
                    n_classes=it.n_options,
                )
            )
        self.auditor.store.add_trials(trials)
        return trials_frame(trials)


def axis_manifest(axis: str, dataset: str, seed: int, shown: dict[str, list[Variant]]) -> dict:
    """The manifest of one axis on one dataset: each item's variants, the formats' sha256, and
    the sha256 of all of it."""
    body = {
        "axis": axis,
        "dataset": dataset,
        "seed": seed,
        "formats": {f.id: f.sha256 for f in FORMATS},
        "entries": {i: [v.describe() for v in variants] for i, variants in shown.items()},
    }
    return {**body, "sha256": sha256_json(body)}


def planned_trials(
    plan: DecompositionPlan,
    spec: DatasetSpec,
    axis: str,
    store: ParaphraseStore,
    seed: int,
    n_override: int | None = None,
) -> int:
    """Trials a cell plans (the live progress display), from the items and the axis alone."""
    shown = get_axis(axis, store)
    items = load_items(spec, n_override or spec.n or plan.n_items, seed, keep=decomposable)
    return sum(len(shown.variants(it)) for it in items)
