"""The default audit cold (empty response cache) and then warm (the same cache), side by side in
one run: wall time of each, the warm/cold ratio and the model calls each made (issue #14,
target 2: a warm rerun ≤ 5 % of the cold one, with 0 model calls).

    python benchmarks/audit_rerun.py [--items-per-dataset N] [-- extra pytest args]

The models' dequantised weights and the bigbench data are read from .flipgate_cache (one-time
setup, not timed); responses, cards, runs and manifests go to a temporary folder. At the default
N (models.yaml) a cold run takes about 10 minutes on 2 cores.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from common import SuiteRun, pytest_args, run_suites, suite_parser


def audit(work: Path, extra: list[str]) -> SuiteRun:
    """One ``pytest suites -n auto`` run into ``work``; prints its last progress line."""
    run = run_suites(work, extra)
    progress = [x for x in run.stderr.splitlines() if x.startswith("flipgate: progress")]
    if progress:  # the controller's live display, in a log: a line every 30 s and a last one
        print(f"  {len(progress)} progress lines, the last: {progress[-1]}")
    return run


def main() -> None:
    args = suite_parser(__doc__).parse_args()
    extra = pytest_args(args)
    with tempfile.TemporaryDirectory(prefix="flipgate-rerun-") as tmp:
        work = args.keep or Path(tmp)
        load = os.getloadavg()[0]
        cold = audit(work, extra)
        warm = audit(work, extra)
        print(f"default audit ({' '.join(extra) or 'models.yaml as is'}), load average {load:.2f}")
        for name, run in (("cold", cold), ("warm", warm)):
            measured, cached, calls = run.model_work()
            suites = run.suite_seconds()
            print(
                f"  {name}: {run.wall_s:7.1f} s wall, {calls} model calls, {measured} trials "
                f"measured by a model, {cached} from the response cache"
            )
            print(
                "    worker seconds per suite: "
                + ", ".join(f"{suite} {sec:.0f}" for suite, sec in sorted(suites.items()))
            )
        ratio = warm.wall_s / cold.wall_s
        print(f"  warm / cold = {ratio:.3f}; model calls on the warm run: {warm.model_work()[2]}")


if __name__ == "__main__":
    main()
