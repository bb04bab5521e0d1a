"""What one regression suite test does: compare a candidate with its baseline on one cell, record,
report and gate the ``vs: baseline`` thresholds (docs/definitions.md §11, docs/regression.md)."""

from __future__ import annotations

import datetime as dt
import json
import warnings
from dataclasses import dataclass

import pytest

from flipgate.backends.floor import NOT_MEASURED_FLOOR, floor_not_measured
from flipgate.backends.identity import is_verified
from flipgate.calls import Auditor
from flipgate.cards.build import git_commit
from flipgate.cell import CellKey
from flipgate.config import Threshold, ThresholdSet
from flipgate.gate.rules import evaluate
from flipgate.order.measure import OrderCells, order_cells
from flipgate.redact import redacted_json
from flipgate.regression.baseline import VS
from flipgate.regression.compare import Arm, CellComparison, compare_cell
from flipgate.regression.plan import Pairing
from flipgate.regression.runs import RunRecord, planned_pairs
from flipgate.results import Verdict
from flipgate.suite.api import Gated, Measurement, SuiteCell
from flipgate.suite.cell_loop import skip_not_applicable


def gate_comparison(comparison: CellComparison, thresholds: ThresholdSet) -> list[Verdict]:
    """Evaluate the candidate's ``vs: baseline`` thresholds on a comparison; sets and returns
    its verdicts."""
    return apply_thresholds(
        comparison,
        thresholds.for_cell(comparison.cell, comparison.dataset, VS),
        thresholds.on_inconclusive,
    )


def apply_thresholds(
    comparison: CellComparison, thresholds: list[Threshold], on_inconclusive: str = "by_rule"
) -> list[Verdict]:
    """Verdicts of ``thresholds`` on the comparison's deltas, each with its McNemar test where
    the metric has one; sets and returns them."""
    verdicts = evaluate(
        thresholds,
        comparison.estimates(),
        comparison.primary_readout,
        on_inconclusive,
        comparison.sequences(),
        None,
        comparison.planned,
        facet=f"{comparison.cell} vs {comparison.baseline}",
    )
    comparison.verdicts = [v.with_context(mcnemar=_mcnemar(comparison, v)) for v in verdicts]
    return comparison.verdicts


def _mcnemar(comparison: CellComparison, v: Verdict) -> dict | None:
    test = (
        comparison.readouts[v.readout].mcnemar.get(v.metric)
        if v.readout in comparison.readouts
        else None
    )
    return test.to_dict() if test else None


class SelfComparison(UserWarning):
    """A regression case whose two versions are one model with identical answers: not compared."""


def _as_stored(fingerprint: dict) -> str:
    """A fingerprint as the trials store keeps it (flipgate.store.TrialStore.add_model)."""
    return redacted_json(fingerprint, sort_keys=True)


def same_model_note(base: Arm, cand: Arm, base_fp: dict, cand_fp: dict) -> str | None:
    """Why a comparison would test nothing, or None: both versions are one model (the same
    fingerprint, with a verified identity: flipgate.backends.identity) and gave the same answer
    text to every trial of the cell, e.g. a re-audit replayed from the response cache."""
    weights = cand_fp.get("weights_sha256")
    if _as_stored(base_fp) != _as_stored(cand_fp) or not is_verified(weights):
        return None

    def answers(arm: Arm) -> dict[tuple, str]:
        rows = arm.trials[["item_id", "condition", "sample", "raw_output"]]
        return {
            (item, condition, sample): json.loads(raw).get("text")
            for item, condition, sample, raw in rows.itertuples(index=False)
        }

    same = answers(base)
    if not same or same != answers(cand):
        return None
    return (
        f"not compared: {cand.model_id} and its baseline {base.model_id} have the same model "
        f"identity ({weights}) and gave identical answers on all {len(same)} trials, so this "
        "case would compare the model with itself (not a pass); change the model, or declare "
        "source.revision/source.weights if the served weights did change (docs/servers.md)"
    )


@dataclass
class RegressionCell(SuiteCell):
    """One parametrised case of suites/regression: (pairing, cell, dataset); call ``run()``."""

    auditor: Auditor
    thresholds_dir: str
    pairing: Pairing
    cell: str
    dataset: str
    partial: bool = False
    capture_manager: object = None

    @property
    def order_cells(self) -> OrderCells:
        """The order cells this case compares, measured in this process."""
        return order_cells(self.auditor)

    @property
    def baseline(self) -> str:
        """The baseline's model id (a pairing without one carries ``skip`` and is not run)."""
        assert self.pairing.baseline is not None, self.pairing.skip
        return self.pairing.baseline

    def live_arm(self, model_id: str) -> Arm:
        """A model's side of the cell, measured (or replayed from the cache) in this session."""
        facet = CellKey.parse(self.cell).facet
        trials, perm = self.order_cells.cell_trials(model_id, self.dataset, self.cell)
        manifest = self.auditor.store.manifests().get((facet, self.dataset), {}).get("sha256")
        return Arm(
            model_id,
            trials,
            tuple(self.auditor.readouts(model_id, facet)[0]),
            manifest,
            perm,
            self.order_cells.stop(model_id, self.dataset, self.cell) is not None,
        )

    def baseline_arm(self) -> tuple[Arm | None, dict]:
        """The baseline's side and its identity (model id, weights sha256, run id, git commit,
        date)."""
        p = self.pairing
        if p.run is None:
            fingerprint = self.auditor.backend(self.baseline).fingerprint
            identity = {
                "model_id": self.baseline,
                "weights_sha256": fingerprint.get("weights_sha256"),
                "run_id": self.auditor.run_id,
                "git_commit": git_commit(),
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "trials_store": str(self.auditor.store.path),
            }
            return self.live_arm(self.baseline), identity
        record = RunRecord.open(p.run)
        return record.arm(self.baseline, self.cell, self.dataset), record.identity(self.baseline)

    def baseline_fingerprint(self) -> dict:
        """The fingerprint of the backend that answered for the baseline (in this run, or as its
        run recorded it)."""
        if self.pairing.run is None:
            return self.auditor.backend(self.baseline).fingerprint
        models = RunRecord.open(self.pairing.run).models
        return models.get(self.baseline, {}).get("fingerprint") or {}

    def compared(self) -> CellComparison:
        cfg, facet = self.auditor.config, CellKey.parse(self.cell).facet
        with self.live_output():
            base, identity = self.baseline_arm()
            if base is None:
                pytest.skip(
                    f"baseline run {identity['run_id']} has no {self.cell} × {self.dataset} trials "
                    "of "
                    f"{self.pairing.baseline!r}: nothing to compare with (not a pass)"
                )
            cand = self.live_arm(self.pairing.candidate)
        note = same_model_note(
            base, cand, self.baseline_fingerprint(), self.auditor.backend(cand.model_id).fingerprint
        )
        if note:  # not a pass: a case that cannot exist, named in the terminal and in Allure
            warnings.warn(
                f"{self.pairing.candidate} on {self.cell} × {self.dataset}: {note}",
                SelfComparison,
                stacklevel=1,
            )
            skip_not_applicable(note)
        primary = self.auditor.readouts(self.pairing.candidate, facet)[1]
        comparison = compare_cell(
            base,
            cand,
            self.cell,
            self.dataset,
            primary,
            cfg.bootstrap_n,
            cfg.level,
            cfg.seed,
            self.partial,
        )
        # across runs the baseline is named with its run, as `python -m flipgate compare` does
        comparison.baseline = (
            self.baseline if self.pairing.run is None else f"{self.baseline}@{identity['run_id']}"
        )
        comparison.baseline_identity = identity
        stop = self.order_cells.stop(self.pairing.candidate, self.dataset, self.cell)
        if stop is not None and not CellKey.parse(self.cell).is_control:  # held by this case
            comparison.planned = planned_pairs(stop.cap, int(base.trials["item_id"].nunique()))
        return comparison

    def skip_unmeasured_floor(self, live: list[str]) -> None:
        """A control case compares two measured floors (Δ_order's): where either model's
        backend copies its replicates (its floor is 0 by construction, docs/definitions.md
        §12.5), the comparison is not applicable — never a pass."""
        for model_id in live:
            why = floor_not_measured(model_id, self.auditor.backend(model_id))
            if why:
                skip_not_applicable(f"{self.cell} vs {self.baseline}: {why}")
        run = self.pairing.run
        if run is not None and RunRecord.open(run).floor_not_measured(
            self.baseline, self.cell, self.dataset
        ):
            skip_not_applicable(
                f"{self.cell} vs {self.baseline}: the baseline's floor is {NOT_MEASURED_FLOOR} "
                "in its run (docs/definitions.md §12.5)"
            )

    def measure(self) -> Measurement:
        """The comparison, gated by the candidate's ``vs: baseline`` thresholds; a case that
        cannot exist (no baseline, an unmeasurable model or floor) is skipped, never passed."""
        p = self.pairing
        if p.skip:
            pytest.skip(p.skip)
        live = [p.candidate] + ([self.baseline] if p.run is None else [])  # measured here
        for model_id in live:
            why = self.order_cells.unmeasurable(
                model_id, self.dataset, CellKey.parse(self.cell).facet
            )
            if why:
                skip_not_applicable(why)
        if CellKey.parse(self.cell).is_control:
            self.skip_unmeasured_floor(live)
        comparison = self.compared()

        def report(verdicts: list[Verdict]) -> None:
            from flipgate.regression.allure import report_regression

            report_regression(comparison, self.auditor.config.level)

        # stored under the cell its verdicts name (apply_thresholds)
        compared_cell = f"{comparison.cell} vs {comparison.baseline}"
        return Measurement(
            [
                Gated(
                    p.candidate,
                    self.dataset,
                    compared_cell,
                    decide=lambda thresholds: gate_comparison(comparison, thresholds),
                )
            ],
            record=lambda store: store.add_comparison(
                p.candidate, self.dataset, self.cell, comparison.baseline, comparison.to_dict()
            ),
            report=report,
        )
