"""A ninth suite that lives outside flipgate (tests/integration/test_suite_registry.py installs it
through the ``flipgate.suites`` entry point): **first-label preference**, the share of answers
that pick whichever option is displayed first over the option_order orderings of a dataset (1 /
options shown without position bias; 1 for a model that always answers "A"). It imports
flipgate.suite.api only (and allure-pytest for its attachment); no flipgate file names it."""

from __future__ import annotations

import json
import math

import allure

import flipgate.suite.api as api

NAME, METRIC, READOUT = "first_label", "first_label_rate", "letter_logprob"
DATASETS = {"type": "array", "minItems": 1, "items": {"type": "string"}}


class FirstLabelSuite(api.Suite):
    name = config_key = NAME
    title = "First-label preference"
    schema = {"type": "object", "required": ["datasets"], "properties": {"datasets": DATASETS}}
    metrics = (api.MetricSpec(METRIC, 0.0, 1.0),)

    def parse(self, spec, where, config):
        for i, dataset in enumerate(spec["datasets"]):
            if dataset not in config.datasets():
                raise api.FlipgateError(
                    f"{where}.datasets[{i}]: not under audit.facets (value: {dataset!r})"
                )
        return tuple(spec["datasets"])

    def cases(self, ctx, part):
        datasets, cfg = ctx.plan(NAME), ctx.audit_config()
        if datasets is None:
            return api.NoCases("not-declared", f"{cfg.path} declares no audit.{NAME}")
        cases = [
            api.Case((m, d), f"{m}-{d}", f"{m}/option_order/{d}", models=(m,), dataset=d)
            for m in cfg.audited(NAME)
            for d in datasets
        ]
        return cases or api.NoCases("not-declared", f"no model lists suite {NAME!r}")

    def planned(self, ctx, param):
        cfg = ctx.audit_config()
        return {(*param, NAME): cfg.n_items(param[1], ctx.items_override) * cfg.k}

    def requests(self, auditor, param):
        return api.facet_requests(auditor, param[1], "option_order")

    def measure(self, cell, param):
        (model_id, dataset), requests = param, self.requests(cell.auditor, param)
        outputs, _ = cell.auditor.outputs(model_id, requests, use_cache=True, label=NAME)
        firsts = [
            float(max(r.labels, key=lambda a: o.label_logprobs.get(a, -math.inf)) == r.labels[0])
            for r, o in zip(requests, outputs)
        ]
        estimate = api.mean_estimate(firsts, cell, cluster=[r.key[1] for r in requests])
        record = {"rate": estimate.estimate, "ci": estimate.ci, "n_answers": len(firsts)}
        return api.Measurement(
            [api.Gated(model_id, dataset, NAME, {READOUT: {METRIC: estimate}}, READOUT)],
            record=lambda store: store.add_suite_record(NAME, model_id, dataset, record),
            report=lambda _: allure.attach(json.dumps(record), name=f"{NAME}.json"),
        )


SUITE = FirstLabelSuite()
