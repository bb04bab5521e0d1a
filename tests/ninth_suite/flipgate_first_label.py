"""A ninth suite that lives outside flipgate (tests/test_suite_registry.py installs it through the
``flipgate.suites`` entry point): **first-label preference**, the share of answers that pick
whichever option is displayed first, over the option_order orderings of a dataset. With no
position bias it is 1 / (options shown); a model that always answers "A" scores 1.

It uses only what any third-party suite may use: flipgate.suite_api for the protocol and the
measurement the core decides, the auditor's requests and cached model calls, the trials store's
generic suite records, and allure-pytest for its attachment. No flipgate file names it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from flipgate.suite_api import Case, Gated, GatedCell, Measurement, MetricSpec, NoCases, SuiteCell

NAME = "first_label"
METRIC = "first_label_rate"


@dataclass(frozen=True)
class FirstLabelPlan:
    datasets: tuple[str, ...]


@dataclass
class FirstLabelCell(SuiteCell):
    auditor: Any
    thresholds_dir: str
    model_id: str
    dataset: str

    def requests(self) -> list:
        return self.auditor.cell_requests(self.dataset, "option_order")[1]

    def measure(self) -> Measurement:
        import allure

        from flipgate.summary import mean_estimate

        cfg, requests = self.auditor.config, self.requests()
        outputs, _ = self.auditor.outputs(
            self.model_id, requests, use_cache=True, label=f"{NAME} {self.dataset}"
        )
        firsts = [
            float(
                max(r.labels, key=lambda lab: o.label_logprobs.get(lab, -math.inf)) == r.labels[0]
            )
            for r, o in zip(requests, outputs)
        ]
        items = [key[1] for key in (r.key for r in requests)]
        estimate = mean_estimate(firsts, cfg.bootstrap_n, cfg.level, cfg.seed, cluster=items)
        record = {"rate": estimate.estimate, "ci": estimate.ci, "n_answers": len(firsts)}
        return Measurement(
            [
                Gated(
                    self.model_id,
                    self.dataset,
                    NAME,
                    {"letter_logprob": {METRIC: estimate}},
                    "letter_logprob",
                    context={"facet": NAME},
                )
            ],
            record=lambda store: store.add_suite_record(NAME, self.model_id, self.dataset, record),
            report=lambda verdicts: allure.attach(
                json.dumps(record), name=f"{NAME}.json", attachment_type="application/json"
            ),
        )


class FirstLabelSuite:
    name = NAME
    config_key = NAME
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["datasets"],
        "properties": {"datasets": {"type": "array", "minItems": 1, "items": {"type": "string"}}},
    }
    facet = NAME  # thresholds name its cells with facet: first_label
    metrics = (MetricSpec(METRIC, 0.0, 1.0),)
    test_dirs = ("suites/first_label",)
    piloted = False

    def parse(self, spec: dict, where: str, config: Any) -> FirstLabelPlan:
        declared = config.datasets()
        for i, d in enumerate(spec["datasets"]):
            if d not in declared:
                from flipgate import FlipgateError

                raise FlipgateError(f"{where}.datasets[{i}]: not under audit.facets (value: {d!r})")
        return FirstLabelPlan(tuple(spec["datasets"]))

    def configure(self, ctx: Any) -> None:
        pass  # nothing to check before collection

    def cases(self, ctx: Any, part: str | None) -> list[Case] | NoCases:
        plan, cfg = ctx.plan(NAME), ctx.audit_config()
        if plan is None:
            return NoCases("not-declared", f"{cfg.path} declares no audit.{NAME}")
        return [
            Case((m, d), f"{m}-{d}", f"{m}/option_order/{d}", models=(m,), dataset=d)
            for m in cfg.audited(NAME)
            for d in plan.datasets
        ] or NoCases("not-declared", f"no model lists suite {NAME!r}")

    def gated(self, ctx: Any) -> list[GatedCell]:
        cases = self.cases(ctx, None)
        return [
            GatedCell(m, NAME, case.dataset)
            for case in (cases if isinstance(cases, list) else [])
            for m in case.models
        ]

    def cell(self, ctx: Any, param: Any, auditor: Any, capture_manager: Any) -> FirstLabelCell:
        return FirstLabelCell(auditor, ctx.thresholds_dir, *param)

    def planned(self, ctx: Any, param: Any) -> dict:
        model_id, dataset = param
        cfg = ctx.audit_config()
        return {(model_id, dataset, NAME): cfg.n_items(dataset, ctx.items_override) * cfg.k}

    def project(self, ctx: Any, auditor: Any, ledger: Any) -> list:
        from flipgate.cost import Projection, estimate_tokens

        out = []
        plan, cfg = ctx.plan(NAME), ctx.audit_config()
        for m in cfg.audited(NAME) if plan is not None else []:
            proj = Projection(m, suite=NAME)
            for d in plan.datasets:
                for r in auditor.cell_requests(d, "option_order")[1]:
                    t_in, t_out = estimate_tokens(r, int(cfg.models[m].get("max_new_tokens", 16)))
                    proj.n_calls, proj.tokens_in = proj.n_calls + 1, proj.tokens_in + t_in
                    proj.tokens_out += t_out
            out.append(proj)
        return out

    def card_section(self, store: Any, model_id: str, dataset: str) -> dict | None:
        records = store.suite_records(NAME, model_id, dataset)
        return records[0] if records else None

    def card_markdown(self, section: dict) -> list[str]:
        return [
            "## First-label preference",
            "",
            f"rate {section['rate']:.3f} (N answers = {section['n_answers']})",
            "",
        ]

    def summary_lines(self, store: Any) -> list[str]:
        rows = store.suite_records(NAME)
        return [f"flipgate: {NAME}: {len(rows)} cell(s) recorded"] if rows else []


SUITE = FirstLabelSuite()
