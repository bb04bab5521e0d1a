"""A run's plan from models.yaml alone, without a pytest session."""

from __future__ import annotations

from pathlib import Path


class PlanOnly:
    """A SuiteContext of models.yaml alone, without a pytest session: the shipped default
    envelope, no baseline (what the thresholds check sees of a run without --envelope or
    --baseline)."""

    def __init__(self, cfg):
        self.cfg, self._memo = cfg, {}

    def audit_config(self):
        return self.cfg

    def option(self, name):
        return None  # no --baseline, no --candidate

    def memo(self, key, make):
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def path(self, option):
        from flipgate import FlipgateError

        if option == "--runs-dir":  # no promoted baseline beside it
            return Path("/nonexistent/flipgate-plan-only/runs")
        raise FlipgateError(f"option {option}: not given")


def threshold_plan(cfg) -> tuple[list, list]:
    """(gated cells, suites) of ``cfg``'s plan, for
    flipgate.suite.threshold_coverage.check_thresholds."""
    from flipgate import registry
    from flipgate.suite.threshold_coverage import gated_cells

    return gated_cells(registry.suites(), PlanOnly(cfg)), registry.suites()
