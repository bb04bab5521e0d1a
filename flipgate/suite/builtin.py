"""What flipgate's own suites share behind the Suite protocol (flipgate/suite/api.py): the card
sections they keep as typed GridCard fields, and the skeleton of a suite driven by one declared
``audit.<key>`` plan of models.yaml. A suite from another package needs neither."""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from flipgate.suite.api import Case, GatedCell, NoCases, Plan, Suite, SuiteContext


class TypedCardSection(Suite):
    """A built-in suite whose card section is a typed field of the GRID card
    (flipgate/cards/model.py), so it adds nothing through the protocol's generic ``suites``
    section, and prints no lines of its own. It gives its typed fields through
    flipgate.cards.build.TypedCardSuite: each member it gives is the function of the same name and
    arguments in :attr:`card_module` (imported on first use, so that reading models.yaml does not
    load the card code); a member that module does not define gives nothing (no fields, no card
    of its own, no lines, no pages)."""

    #: the module of its card code (``flipgate.<suite>.card``); None: it gives no card fields
    card_module: str | None = None
    #: where its own card comes in the search for a dataset's card (last: it has none)
    own_card_rank = 100

    @property
    def test_dirs(self) -> tuple[str, ...]:
        """Its folder of the suites flipgate ships (the package ``flipgate_suites``, the
        repository's ``suites/``), named after it."""
        return (f"flipgate_suites/{self.name}",)

    def card_section(self, store: Any, model_id: str, dataset: str) -> dict | None:
        return None

    def card_markdown(self, section: dict) -> list[str]:
        return []

    def summary_lines(self, store: Any) -> list[str]:
        return []

    def configure(self, ctx: Any) -> None:
        """Nothing of its own to check before collection."""

    def _give(self, member: str, nothing: Any, *args: Any) -> Any:
        """What :attr:`card_module`'s function ``member`` returns for ``args``; ``nothing`` where
        the module does not define it."""
        module = importlib.import_module(self.card_module) if self.card_module else None
        function = getattr(module, member, None)
        return nothing if function is None else function(*args)

    def card_fields(self, ctx: Any) -> dict[str, Any]:
        return self._give("card_fields", {}, ctx)

    def own_card(self, ctx: Any, sections: dict[str, Any]) -> Any:
        return self._give("own_card", None, ctx, sections)

    def card_fields_markdown(self, card: dict) -> list[str]:
        return self._give("card_fields_markdown", [], card)

    def model_pages(self, store: Any, model_id: str, run_id: str, level: float) -> dict[str, str]:
        return self._give("model_pages", {}, store, model_id, run_id, level)

    def model_index_metrics(self, card: dict) -> list[dict]:
        return self._give("model_index_metrics", [], card)

    def own_card_label(self, card: dict) -> str | None:
        return self._give("own_card_label", None, card)

    def model_card_lines(self, cards: list[dict]) -> list[str]:
        return self._give("model_card_lines", [], cards)


def schema_beside(module_file: str) -> dict:
    """The JSON Schema fragment ``schema.json`` in the folder of ``module_file`` (a suite's
    ``audit.<config_key>``, merged into models.yaml's schema by flipgate.config)."""
    return json.loads((Path(module_file).parent / "schema.json").read_text(encoding="utf-8"))


class DeclaredPlanSuite(TypedCardSection, ABC):
    """An opt-in suite: models list it under ``suites:``, and its plan is ``audit.<config_key>``
    (described by the ``schema`` fragment, parsed by :meth:`parse` when flipgate.config reads
    models.yaml). It runs one case per (audited model, key of the plan); a subclass names the
    keys, how a case is named and grouped, the cell that runs it, its planned trials and how
    one model is priced."""

    name: str
    config_key: str
    schema: dict
    piloted = False

    #: its plan's class, ``"module:Class"`` with ``Class.parse(spec, where, config)`` (the
    #: suite's plan.py; imported when models.yaml declares the plan)
    plan_class: str

    def parse(self, spec: dict, where: str, config: Any) -> Any:
        """``audit.<config_key>`` as the suite's plan (:attr:`plan_class`)."""
        module, _, name = self.plan_class.partition(":")
        return getattr(importlib.import_module(module), name).parse(spec, where, config)

    def plan_of(self, config: Any) -> Any:
        """The suite's plan in the AuditConfig, None when models.yaml does not declare it."""
        return config.plans.get(self.name)

    @abstractmethod
    def keys(self, plan: Any) -> list[tuple[str, ...]]:
        """What one model's cases run on (datasets, axes, sweeps, ...)."""

    @abstractmethod
    def case(self, model_id: str, key: tuple[str, ...]) -> Case:
        """The case of one model on one key."""

    @abstractmethod
    def cell_class(self) -> Any:
        """The class of its cells, called as ``(auditor, thresholds dir, plan, *case parameter,
        capture manager)`` (imported when a cell is first made)."""

    @abstractmethod
    def gated_cells(self, config: Any, plan: Any, model_id: str) -> list[GatedCell]:
        """One model's cells that thresholds may select."""

    @abstractmethod
    def planned_trials(self, ctx: SuiteContext, plan: Any, param: Any) -> Plan:
        """The trials a case records (the live progress display)."""

    @abstractmethod
    def project_model(self, auditor: Any, plan: Any, model_id: str) -> list:
        """The priced projections of one model's calls (flipgate.cost.Projection)."""

    def declared(self, ctx: SuiteContext) -> Any:
        """The plan, asked for by a case that was parametrised (so it is declared)."""
        plan = self.plan_of(ctx.audit_config())
        assert plan is not None, f"audit.{self.config_key} is not declared"
        return plan

    def cases(self, ctx: SuiteContext, part: str | None) -> list[Case] | NoCases:
        cfg = ctx.audit_config()
        plan = self.plan_of(cfg)
        if plan is None:
            return NoCases("not-declared", f"{cfg.path} declares no audit.{self.config_key}")
        cases = [self.case(m, key) for m in cfg.audited(self.name) for key in self.keys(plan)]
        return cases or NoCases("not-declared", f"no model in {cfg.path} lists suite {self.name!r}")

    def cell(self, ctx: SuiteContext, param: Any, auditor: Any, capture_manager: Any) -> Any:
        plan = self.declared(ctx)
        return self.cell_class()(auditor, ctx.thresholds_dir, plan, *param, capture_manager)

    def planned(self, ctx: SuiteContext, param: Any) -> Plan:
        return self.planned_trials(ctx, self.declared(ctx), param)

    def gated(self, ctx: SuiteContext) -> list[GatedCell]:
        cfg = ctx.audit_config()
        plan = self.plan_of(cfg)
        if plan is None:
            return []
        return [c for m in cfg.audited(self.name) for c in self.gated_cells(cfg, plan, m)]

    def project(self, ctx: SuiteContext, auditor: Any, ledger: Any) -> list:
        cfg = ctx.audit_config()
        plan = self.plan_of(cfg)
        if plan is None:
            return []
        return [p for m in cfg.audited(self.name) for p in self.project_model(auditor, plan, m)]
