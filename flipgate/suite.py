"""What one suite test does: run a (facet or control, model, dataset) cell and gate it."""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import pytest

from flipgate import FlipgateError
from flipgate.audit import Auditor
from flipgate.config import ThresholdSet, load_thresholds
from flipgate.facets import get_facet, split_cell
from flipgate.gate import evaluate
from flipgate.report import report_cell
from flipgate.summary import control_summary, facet_summary


#: on_inconclusive settings, least to most strict
STRICTNESS = ("warn", "xfail", "fail")


def strictest(threshold_sets) -> str:
    """The strictest ``on_inconclusive`` of ``threshold_sets``: a cell gated for a whole roster
    decides inconclusive verdicts as the strictest model's file says, whatever the roster's order."""
    return max((ts.on_inconclusive for ts in threshold_sets), key=STRICTNESS.index, default="warn")


class InconclusiveThreshold(UserWarning):
    """A threshold whose CI straddles its bound (SPEC §5)."""


class ThresholdWarning(UserWarning):
    """A ``warn``-rule threshold that was exceeded."""


@dataclass
class FlipCell:
    """One parametrised suite case; ``run()`` measures, records, reports and asserts."""

    auditor: Auditor
    thresholds_dir: str
    name: str
    model_id: str
    dataset: str
    capture_manager: object = None

    def _quiet(self):
        cm = self.capture_manager
        return cm.global_and_fixture_disabled() if cm is not None else contextlib.nullcontext()

    def measure(self) -> tuple[dict, object]:
        cfg = self.auditor.config
        control, facet = split_cell(self.name)
        readouts = self.auditor.readouts(self.model_id, facet)[0]
        with self._quiet():
            trials = self.auditor.trials(self.model_id, self.dataset, self.name)
            perm = self.auditor.trials(self.model_id, self.dataset, facet) if control else None
            judged = getattr(get_facet(facet), "judged", False) and not control
            verdicts = self.auditor.judgements(self.model_id, self.dataset, self.name, trials) if judged else None
        summaries, items = {}, None
        for r in readouts:
            if perm is not None:
                summaries[r], table = control_summary(perm, trials, r, cfg.bootstrap_n, cfg.level, cfg.seed)
            else:
                summaries[r], table = facet_summary(trials, r, cfg.bootstrap_n, cfg.level, cfg.seed, verdicts)
            table = table.add_prefix(f"{r}:").rename(columns={f"{r}:item_id": "item_id"})
            items = table if items is None else items.merge(table, on="item_id")
        return summaries, items

    def run(self) -> list[dict]:
        try:
            thresholds: ThresholdSet = load_thresholds(self.thresholds_dir, self.model_id)
            why = self.auditor.unmeasurable(self.model_id, self.dataset, split_cell(self.name)[1])
            if why:
                pytest.skip(why)
            summaries, items = self.measure()
        except FlipgateError as exc:
            pytest.fail(f"flipgate: {exc}", pytrace=False)
        primary = self.auditor.readouts(self.model_id, split_cell(self.name)[1])[1]
        verdicts = evaluate(thresholds.for_cell(self.name, self.dataset), summaries, primary)
        for v in verdicts:
            v["facet"] = self.name
        self.auditor.store.add_verdicts(self.model_id, self.dataset, self.name, verdicts)
        report_cell(self.name, self.dataset, self.model_id, summaries, items, verdicts, {
            "model": self.model_id, "dataset": self.dataset, "facet": self.name, "K": self.auditor.config.k,
            "N": summaries[primary]["n_items"], "primary_readout": primary,
            "thresholds": ", ".join(thresholds.files)})
        assert_verdicts(verdicts, thresholds.on_inconclusive)
        return verdicts


def describe(v: dict) -> str:
    ci = v.get("ci")
    ci_text = f" CI [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and ci[0] is not None else ""
    est = "no estimate" if v["estimate"] is None else f"{v['estimate']:.3f}"
    who = f"{v['model']}: " if v.get("model") else ""
    return f"{who}{v['threshold']} [{v['source']}]: {est}{ci_text} -> {v['verdict']}"


def assert_verdicts(verdicts: list[dict], on_inconclusive: str) -> None:
    """Fail on failed/missing verdicts (and inconclusive ones when the file says so); warn or xfail
    on inconclusive ones; warn on exceeded ``warn`` thresholds."""
    failed = [v for v in verdicts if v["verdict"] in ("fail", "missing")]
    unsure = [v for v in verdicts if v["verdict"] == "inconclusive"]
    for v in verdicts:
        if v["verdict"] == "warn":
            warnings.warn(describe(v), ThresholdWarning, stacklevel=2)
    if failed or (unsure and on_inconclusive == "fail"):
        pytest.fail("threshold(s) violated:\n  " + "\n  ".join(describe(v) for v in failed + unsure
                    if v in failed or on_inconclusive == "fail"), pytrace=False)
    if unsure:
        text = "inconclusive threshold(s):\n  " + "\n  ".join(describe(v) for v in unsure)
        if on_inconclusive == "xfail":
            pytest.xfail(text)
        warnings.warn(text, InconclusiveThreshold, stacklevel=2)
