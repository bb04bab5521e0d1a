"""Fixed N against sequential gates (docs/definitions.md §12) on the default audit's order cells,
side by side in one run: each arm runs the order suites (facets, same-ordering controls and the
regression case) with its own empty response cache, at the same cap; printed are the model calls
and wall time of each, the items each sequential cell drew, and every threshold's verdict under
both, with every difference named.

    python benchmarks/sequential_gates.py [--items-per-dataset CAP] [--keep DIR] [-- pytest args]

A fixed-N verdict is *decisive* when it is pass or fail (not inconclusive); the issue's target is
identical decisions wherever fixed N was decisive. The models' dequantised weights are read from
.flipgate_cache (one-time setup, not timed).
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

from common import SuiteRun, pytest_args, run_suites, suite_parser

ORDER_SUITES = ("suites/order", "suites/regression")
DECISIVE = ("pass", "fail")


def verdicts(run: SuiteRun) -> dict[tuple[str, str, str, str], dict]:
    """(model, dataset, cell, threshold) -> the stored verdict."""
    with sqlite3.connect(run.store) as conn:
        rows = conn.execute("SELECT model_id, dataset, facet, threshold, result FROM verdicts")
        return {(m, d, c, t): json.loads(r) for m, d, c, t, r in rows}


def stops(run: SuiteRun) -> list[dict]:
    """The sequential cells' stop records."""
    with sqlite3.connect(run.store) as conn:
        has = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sequential_stops'"
        ).fetchone()
        if not has:
            return []
        return [json.loads(r) for (r,) in conn.execute("SELECT record FROM sequential_stops")]


def shown(v: dict) -> str:
    ci = v.get("ci") or (None, None)
    interval = "CS" if v.get("interval") else "CI"
    est = "—" if v.get("estimate") is None else f"{v['estimate']:.3f}"
    bounds = "" if ci[0] is None else f" {interval} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{v['verdict']} ({est}{bounds})"


def main() -> None:
    args = suite_parser(__doc__).parse_args()
    extra = pytest_args(args)
    with tempfile.TemporaryDirectory(prefix="flipgate-sequential-") as tmp:
        work = args.keep or Path(tmp)
        load = os.getloadavg()[0]
        fixed = run_suites(work / "fixed", [*extra, "--fixed-n"], ORDER_SUITES)
        sequential = run_suites(work / "sequential", extra, ORDER_SUITES)
        print(
            f"order suites ({' '.join(extra) or 'models.yaml as is'}), load average {load:.2f} "
            "at the start; each arm with its own empty response cache"
        )
        for name, run in (("fixed N", fixed), ("sequential", sequential)):
            _, _, calls = run.model_work()
            print(f"  {name:10s}: {run.wall_s:7.1f} s wall, {calls:6d} model calls")
        f_calls, s_calls = fixed.model_work()[2], sequential.model_work()[2]
        print(
            f"  sequential / fixed: wall {sequential.wall_s / fixed.wall_s:.3f}, "
            f"model calls {s_calls / max(f_calls, 1):.3f}"
        )
        print("  where each sequential cell stopped:")
        for stop in sorted(
            stops(sequential), key=lambda s: (s["model_id"], s["dataset"], s["cell"])
        ):
            print(
                f"    {stop['model_id']:28s} {stop['dataset']:20s} {stop['cell']:36s} "
                f"{stop['n_items']:4d}/{stop['cap']:<4d} {stop['reason']}"
            )
        a, b = verdicts(fixed), verdicts(sequential)
        decided = {
            name: sum(v["verdict"] in DECISIVE for v in vs.values())
            for name, vs in (("fixed", a), ("sequential", b))
        }
        print(
            f"  verdicts: {len(a)} fixed, {len(b)} sequential; decided (pass or fail): "
            f"{decided['fixed']} fixed, {decided['sequential']} sequential"
        )
        same_decision = changed = 0
        for key in sorted(set(a) | set(b)):
            va, vb = a.get(key), b.get(key)
            if va and vb and va["verdict"] == vb["verdict"]:
                same_decision += va["verdict"] in DECISIVE
                continue
            changed += 1
            what = "DECISION CHANGED" if va and va["verdict"] in DECISIVE else "differs"
            print(
                f"    {what}: {' · '.join(key)}: fixed {shown(va) if va else 'absent'} -> "
                f"sequential {shown(vb) if vb else 'absent'}"
            )
        print(f"  identical decisive verdicts: {same_decision}; verdicts that differ: {changed}")


if __name__ == "__main__":
    main()
