"""Trials of one continuity cell (docs/definitions.md §10): the sweep's inputs (manifested), the
greedy answer on each input (accuracy, FESTA's y0, the log-prob estimator), and the estimator's
sampled answers on a sampling variant of the model; each call a trial in the run store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from filelock import FileLock

from flipgate import FlipgateError
from flipgate.backends.base import Output, Request
from flipgate.calls import Auditor
from flipgate.continuity.estimators import (
    answer_probabilities,
    cluster_key,
    dse,
    festa,
    logprob_uncertainty,
)
from flipgate.continuity.names import CONTINUITY_CELL
from flipgate.continuity.plan import ContinuityPlan
from flipgate.continuity.sweeps import SWEEPS, SweepInput, SweepSpec, generate
from flipgate.files import atomic_write
from flipgate.hashing import sha256_bytes, sha256_text
from flipgate.metrics.continuity import SweepPoint

ANSWER_PREFIX = "Answer:"


class EstimatorUnavailable(FlipgateError):
    """The estimator cannot be computed for this model (no log-probs, or an answer its tokenizer
    spells with several tokens): the cell is skipped with this reason, not failed."""


def input_id(x: SweepInput) -> str:
    return f"{x.source}/{x.branch}{x.step}"


def spellings(spec: SweepSpec) -> dict[str, tuple[str, ...]]:
    """The labels whose first-token log-probs stand for each canonical answer (the log-prob
    estimator): the word and its capitalised form; single digits only for numbers (a backend
    scores single-token labels)."""
    return {
        a: tuple(dict.fromkeys((a, a.capitalize())))
        for a in spec.answers
        if not a.isdigit() or len(a) == 1
    }


@dataclass(frozen=True)
class Call:
    """One planned call: its input, the cell part it belongs to ("greedy", "dse", "festa"), which
    input variant it shows (FESTA: equivalents first, then complements), its gold, the request."""

    x: SweepInput
    part: str
    variant: int
    complementary: bool
    gold: str
    request: Request


class SweepRunner:
    def __init__(self, auditor: Auditor, plan: ContinuityPlan):
        self.auditor, self.plan = auditor, plan

    # -- inputs ----------------------------------------------------------------------------------
    def n_sources(self) -> int:
        """Sources per sweep: ``--items-per-dataset``, else ``audit.continuity.sources``."""
        return self.auditor.n_override or self.plan.n_sources

    def inputs(self, sweep: str) -> list[SweepInput]:
        p = self.plan
        return generate(
            sweep, self.n_sources(), self.auditor.config.seed, p.n_equivalent, p.n_complementary
        )

    def manifest(self, sweep: str, inputs: list[SweepInput]) -> str:
        """Write every input (prompt, gold, d, variants) to fixtures/manifests/continuity before
        any call; returns its sha256."""
        body = {
            "sweep": sweep,
            "seed": self.auditor.config.seed,
            "inputs": {
                input_id(x): {
                    "branch": x.branch,
                    "step": x.step,
                    "d": x.d,
                    "prompt": x.prompt,
                    "gold": x.gold,
                    "equivalents": list(x.equivalents),
                    "complements": [list(c) for c in x.complements],
                    "meta": x.meta,
                    **({"image_sha256": sha256_bytes(x.image)} if x.image is not None else {}),
                    **({"audio_sha256": sha256_bytes(x.audio)} if x.audio is not None else {}),
                }
                for x in inputs
            },
        }
        text = json.dumps(body, sort_keys=True, indent=1)
        sha = sha256_text(text)
        n, seed = self.n_sources(), self.auditor.config.seed
        path = self.auditor.paths.manifests / "continuity" / f"{sweep}__n{n}__s{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            if not path.exists() or path.read_text() != text:
                atomic_write(path, text)
        self.auditor.store.add_manifest(CONTINUITY_CELL, sweep, n, sha, str(path))
        return sha

    # -- calls -----------------------------------------------------------------------------------
    def sampler(self, model_id: str) -> str:
        """The model's sampling variant (``audit.continuity`` temperature and top_p)."""
        p = self.plan
        name = f"{model_id}@continuity/T{p.temperature:g}/p{p.top_p:g}"
        base = self.auditor.model(model_id)
        self.auditor.add_variant(
            name,
            {
                **base,
                "id": name,
                "suites": [],
                "variant_of": model_id,
                "decoding": {
                    **(base.get("decoding") or {}),
                    "temperature": p.temperature,
                    "top_p": p.top_p,
                },
            },
        )
        return name

    def greedy_calls(self, sweep: str, inputs: list[SweepInput]) -> list[Call]:
        labels = [s for spelled in spellings(SWEEPS[sweep]).values() for s in spelled]
        return [
            Call(x, "greedy", 0, False, x.gold, self._request(x, "greedy", 0, x.prompt, 0, labels))
            for x in inputs
        ]

    def _request(
        self,
        x: SweepInput,
        part: str,
        variant: int,
        prompt: str,
        seed: int,
        labels: tuple[str, ...] | list[str] = (),
    ) -> Request:
        media = "<image>\n" if x.image is not None else "<audio>\n" if x.audio is not None else ""
        return Request(
            (("user", media + prompt),),
            ANSWER_PREFIX,
            tuple(labels),
            seed,
            (x.sweep, input_id(x), f"{CONTINUITY_CELL}[{part}]", variant, seed),
            max_new_tokens=self.plan.max_new_tokens,
            images=() if x.image is None else (x.image,),
            audios=() if x.audio is None else (x.audio,),
        )

    def sampled_calls(self, inputs: list[SweepInput], estimator: str) -> list[Call]:
        """DSE: N samples on the input; FESTA: N spread evenly over the equivalent rewordings and
        N over the complementary inputs (none for a sweep without complements)."""
        return [c for x in inputs for c in self._sampled(x, estimator)]

    def _sampled(self, x: SweepInput, estimator: str) -> Iterator[Call]:
        n = self.plan.samples
        if estimator == "dse":
            groups = [[(x.prompt, x.gold)]]
        elif estimator == "festa":
            groups = [[(p, x.gold) for p in x.equivalents], list(x.complements)]
        else:
            return
        variant = 0
        for complementary, group in enumerate(groups):
            for prompt, gold in group:
                for s in range(n // len(group)):
                    req = self._request(x, estimator, variant, prompt, s)
                    yield Call(x, estimator, variant, bool(complementary), gold, req)
                variant += 1

    def run_calls(
        self, model_id: str, calls: list[Call], label: str
    ) -> tuple[list[Output], list[str | None]]:
        """Every call's output and its canonical answer (None: unparsable); each a trial."""
        outputs, cached = self.auditor.outputs(
            model_id, [c.request for c in calls], use_cache=True, label=label
        )
        spec = SWEEPS[calls[0].x.sweep] if calls else None
        stored_as = self.auditor.model(model_id).get("variant_of", model_id)
        sweep = calls[0].x.sweep if calls else ""
        trial = self.auditor.trial_maker(stored_as, sweep, answered_by=model_id)
        trials = []
        answers = [spec.parse(out.text) if spec else None for out in outputs]
        for c, out, hit, answer in zip(calls, outputs, cached, answers):
            trials.append(
                trial(
                    c.request,
                    out,
                    hit,
                    dataset=c.x.sweep,
                    item_id=input_id(c.x),
                    facet=f"{CONTINUITY_CELL}[{c.part}]",
                    condition=c.variant,
                    permutation=[],
                    sample=c.request.seed,
                    readouts={"regex": answer},
                    mapped={"regex": answer},
                    correct={"regex": None if answer is None else answer == c.gold},
                    gold=c.gold,
                    n_classes=len(spec.answers) if spec else 0,
                )
            )
        self.auditor.store.add_trials(trials)
        return outputs, answers

    # -- the cell's points -----------------------------------------------------------------------
    def points(self, model_id: str, sweep: str, estimator: str) -> list[SweepPoint]:
        """Every input's uncertainty under ``estimator`` and whether the greedy answer is right."""
        spec = SWEEPS[sweep]
        inputs = self.inputs(sweep)
        self.manifest(sweep, inputs)
        greedy = self.greedy_calls(sweep, inputs)
        sampled = self.sampled_calls(inputs, estimator)
        store = self.auditor.store
        store.set_planned(model_id, sweep, f"{CONTINUITY_CELL}[greedy]", len(greedy))
        if sampled:
            store.set_planned(model_id, sweep, f"{CONTINUITY_CELL}[{estimator}]", len(sampled))
        first, parsed = self.run_calls(model_id, greedy, f"{CONTINUITY_CELL}/{sweep}")
        y0 = {input_id(c.x): a for c, a in zip(greedy, parsed)}
        answers: dict[tuple[str, str], list[str | None]] = {}
        texts: dict[tuple[str, str], list[str]] = {}
        if sampled:
            label = f"{CONTINUITY_CELL}/{sweep}/{estimator}"
            outs, said = self.run_calls(self.sampler(model_id), sampled, label)
            for c, o, a in zip(sampled, outs, said):
                group = (input_id(c.x), "comp" if c.complementary else "eq")
                answers.setdefault(group, []).append(a)
                texts.setdefault(group, []).append(o.text)
        points = []
        for c, out in zip(greedy, first):
            iid = input_id(c.x)
            if estimator == "dse":
                keys = [cluster_key(a, t) for a, t in zip(answers[iid, "eq"], texts[iid, "eq"])]
                u = dse(keys)
            elif estimator == "festa":
                u = festa(y0[iid], answers[iid, "eq"], answers.get((iid, "comp"), []))
            else:
                probs = answer_probabilities(out.label_logprobs, spellings(spec))
                if isinstance(probs, str):
                    raise EstimatorUnavailable(
                        f"model {model_id!r}: the logprob estimator needs a single-token spelling "
                        f"of every answer with its log-prob at the answer position; {probs} "
                        f"(input {iid!r})"
                    )
                u = logprob_uncertainty(probs)
            points.append(
                SweepPoint(
                    c.x.source,
                    c.x.branch,
                    c.x.step,
                    c.x.d,
                    u,
                    y0[iid] == c.x.gold,
                    y0[iid] is not None,
                )
            )
        return points


def planned(
    plan: ContinuityPlan, sweep: str, estimator: str, n_override: int | None, seed: int
) -> dict[str, int]:
    """Trials a cell plans per part (the live progress display): the greedy answers and its
    samples."""
    inputs = generate(
        sweep, n_override or plan.n_sources, seed, plan.n_equivalent, plan.n_complementary
    )
    per_input = {"dse": plan.samples, "logprob": 0}.get(
        estimator, plan.samples * (1 + bool(inputs and inputs[0].complements))
    )
    out = {f"{CONTINUITY_CELL}[greedy]": len(inputs)}
    if per_input:
        out[f"{CONTINUITY_CELL}[{estimator}]"] = len(inputs) * per_input
    return out
