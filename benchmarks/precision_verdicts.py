"""The default audit's order suites (facets and same-ordering controls) at the models' own
precision (models.yaml: bfloat16) and at float32, side by side in one run: how often each
readout of a trial agrees, and whether every flip-rate verdict is the same (issue #14, target 3:
an engine that changes numerics must leave the flip-rate verdicts of the default audit as they
are).

    python benchmarks/precision_verdicts.py [--keep DIR] [--items-per-dataset N] [-- pytest args]

Both arms share one response cache (the precision is part of its key), so after a default audit
into the same ``--keep`` folder the first arm is replayed. float32 is the reference: with the
shared-prefix cache its answers equal a naive generate loop's (benchmarks/engine_throughput.py).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd
import yaml
from common import ROOT, pytest_args, run_suites, suite_parser

from flipgate.store import TrialStore

ORDER_SUITES = ("suites/facets", "suites/controls")
KEY = ["model_id", "dataset", "facet", "item_id", "condition", "sample"]


def float32_models(source: Path, out: Path) -> Path:
    """``source`` with every local (hf) model in float32; written to ``out``."""
    data = yaml.safe_load(source.read_text())
    for model in data["models"]:
        if model.get("backend") == "hf":
            model["dtype"] = "float32"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def readout_agreement(own: TrialStore, ref: TrialStore) -> pd.DataFrame:
    """Per model and readout: trials in both runs and the share whose content label is equal
    (an unparsed answer counts as its own label)."""
    a, b = own.trials(), ref.trials()
    joined = a[KEY + ["mapped"]].merge(b[KEY + ["mapped"]], on=KEY, suffixes=("", "_ref"))
    rows = []
    for model, group in joined.groupby("model_id"):
        for readout in sorted({r for m in group["mapped"] for r in m}):
            same = [
                m.get(readout) == r.get(readout) for m, r in zip(group.mapped, group.mapped_ref)
            ]
            rows.append(
                {
                    "model": model,
                    "readout": readout,
                    "trials": len(same),
                    "agreement": sum(same) / len(same),
                }
            )
    return pd.DataFrame(rows)


def verdict_table(own: TrialStore, ref: TrialStore) -> pd.DataFrame:
    """Every verdict of either run, keyed by (model, dataset, cell, threshold), with both runs'
    estimate and verdict label."""

    def frame(store: TrialStore) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "model": m,
                "dataset": d,
                "cell": v.facet,
                "metric": v.metric,
                "readout": v.readout,
                "threshold": v.threshold,
                "estimate": v.estimate,
                "verdict": v.verdict,
            }
            for m, d, v in store.all_verdicts()
        )

    key = ["model", "dataset", "cell", "metric", "readout", "threshold"]
    return frame(own).merge(frame(ref), on=key, how="outer", suffixes=("", "_f32"))


def main() -> None:
    ap = suite_parser(__doc__)
    ap.add_argument("--models", type=Path, default=ROOT / "models.yaml")
    args = ap.parse_args()
    extra = pytest_args(args)
    with tempfile.TemporaryDirectory(prefix="flipgate-precision-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        load = os.getloadavg()[0]
        reference = float32_models(args.models, work / "models-float32.yaml")
        own = run_suites(work, ["--models", str(args.models), *extra], ORDER_SUITES)
        ref = run_suites(work, ["--models", str(reference), *extra], ORDER_SUITES)
        own_store, ref_store = TrialStore.read_only(own.store), TrialStore.read_only(ref.store)
        agreement = readout_agreement(own_store, ref_store)
        verdicts = verdict_table(own_store, ref_store)
        print(f"order suites at the models' precision vs float32, load average {load:.2f}")
        for name, run in (("own precision", own), ("float32", ref)):
            measured, cached, _ = run.model_work()
            print(
                f"  {name}: {run.wall_s:.0f} s wall, {measured} trials measured by a model, "
                f"{cached} from the response cache"
            )
        print("  readout agreement per trial (content label equal to float32's):")
        print(agreement.to_string(index=False, float_format="%.3f"))
        flips = verdicts[verdicts.metric.str.startswith("flip_rate")]
        for name, table in (("flip-rate", flips), ("all", verdicts)):
            same = (table.verdict == table.verdict_f32).sum()
            print(f"  {name} verdicts identical: {same} of {len(table)}")
        differ = verdicts[verdicts.verdict != verdicts.verdict_f32]
        if len(differ):
            print("  verdicts that differ:")
            print(differ.to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main()
