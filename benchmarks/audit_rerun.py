"""The default audit cold (empty response cache) and then warm (the same cache), side by side in
one run: wall time of each, the warm/cold ratio and the model calls each made (issue #14,
target 2: a warm rerun ≤ 5 % of the cold one, with 0 model calls).

    python benchmarks/audit_rerun.py [--items-per-dataset N] [-- extra pytest args]

The models' dequantised weights and the bigbench data are read from .flipgate_cache (one-time
setup, not timed); responses, cards, runs and manifests go to a temporary folder. At the default
N (models.yaml) a cold run takes about 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def suite_seconds(stdout: str) -> dict[str, float]:
    """Worker seconds per suite folder (facets, controls, regression, analysis, benchmarks) from
    pytest's ``--durations=0`` table (setup, call and teardown)."""
    seconds: dict[str, float] = {}
    for line in stdout.splitlines():
        match = re.match(r"\s*([\d.]+)s (setup|call|teardown)\s+suites/(\w+)/", line)
        if match:
            seconds[match[3]] = seconds.get(match[3], 0.0) + float(match[1])
    return seconds


def audit(work: Path, extra: list[str]) -> tuple[float, int, int, int, dict[str, float]]:
    """(wall seconds, trials measured by a model, trials read from the response cache, prompts
    sent to a model: trials, judge and pilot calls, worker seconds per suite) of one
    ``pytest suites -n auto`` run into ``work``."""
    runs = work / "runs"
    before = set(runs.glob("*")) if runs.exists() else set()
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "suites",
        "-n",
        "auto",
        "-q",
        "--durations=0",
        "--cache-dir",
        str(work / "cache"),
        "--runs-dir",
        str(runs),
        "--grid-cards-dir",
        str(work / "cards"),
        "--manifests-dir",
        str(work / "manifests"),
        *extra,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):  # 1: a gate failed, which the default audit does
        sys.exit(f"audit failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    (store,) = [p / "trials.sqlite" for p in set(runs.glob("*")) - before]
    with sqlite3.connect(store) as conn:
        measured, cached = conn.execute(
            "SELECT SUM(from_cache = 0), SUM(from_cache = 1) FROM trials"
        ).fetchone()
        (calls,) = conn.execute("SELECT SUM(prompts) FROM model_calls").fetchone()
    progress = [x for x in proc.stderr.splitlines() if x.startswith("flipgate: progress")]
    if progress:  # the controller's live display, in a log: a line every 30 s and a last one
        print(f"  {len(progress)} progress lines, the last: {progress[-1]}")
    return wall, measured or 0, cached or 0, calls or 0, suite_seconds(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items-per-dataset", type=int, default=None)
    ap.add_argument(
        "--keep", type=Path, default=None, help="write both runs here (kept) instead of a temp dir"
    )
    ap.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args()
    extra = list(args.extra)
    if args.items_per_dataset:
        extra += ["--items-per-dataset", str(args.items_per_dataset)]
    with tempfile.TemporaryDirectory(prefix="flipgate-rerun-") as tmp:
        work = args.keep or Path(tmp)
        (work / "cache").mkdir(parents=True)
        models = ROOT / ".flipgate_cache" / "models"
        if models.exists():  # dequantised weights: one-time setup, not part of either run
            (work / "cache" / "models").symlink_to(models)
        load = os.getloadavg()[0]
        cold = audit(work, extra)
        warm = audit(work, extra)
    print(f"default audit ({' '.join(extra) or 'models.yaml as is'}), load average {load:.2f}")
    for name, (wall, measured, cached, calls, suites) in (("cold", cold), ("warm", warm)):
        print(
            f"  {name}: {wall:7.1f} s wall, {calls} model calls, {measured} trials measured by a "
            f"model, {cached} from the response cache"
        )
        print(
            "    worker seconds per suite: "
            + ", ".join(f"{suite} {sec:.0f}" for suite, sec in sorted(suites.items()))
        )
    print(f"  warm / cold = {warm[0] / cold[0]:.3f}; model calls on the warm run: {warm[3]}")


if __name__ == "__main__":
    main()
