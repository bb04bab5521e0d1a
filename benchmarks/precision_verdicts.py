"""The default audit's order suites (facets and same-ordering controls) at the models' own
precision (models.yaml: auto, bfloat16 on a CPU with native bf16) and with every local model in
another dtype (default float32, the reference), side by side in one run: how often each readout
of a trial agrees, and whether every verdict is the same (issue #14, target 3: numerics that
differ from the reference must leave the flip-rate verdicts of the default audit as they are;
docs/engine.md).

    python benchmarks/precision_verdicts.py [--dtype float32] [--keep DIR]
        [--items-per-dataset N] [-- pytest args]

Both arms share one response cache (the precision is part of its key), so after a default audit
into the same ``--keep`` folder the reference arm is replayed. In float32 the engine's answers
equal a naive generate loop's (benchmarks/engine_throughput.py).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd
import yaml
from common import ROOT, pytest_args, run_suites, suite_parser

from flipgate.store import TrialStore

ORDER_SUITES = ("suites/order",)
KEY = ["model_id", "dataset", "facet", "item_id", "condition", "sample"]


def models_in(dtype: str, source: Path, out: Path) -> Path:
    """``source`` with every local (hf) model in ``dtype``; written to ``out``."""
    data = yaml.safe_load(source.read_text())
    for model in data["models"]:
        if model.get("backend") == "hf":
            model["dtype"] = dtype
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def readout_agreement(ref: TrialStore, other: TrialStore) -> pd.DataFrame:
    """Per model and readout: trials in both runs and the share whose content label is equal
    (an unparsed answer counts as its own label)."""
    a, b = other.trials(), ref.trials()
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


def verdict_table(ref: TrialStore, other: TrialStore) -> pd.DataFrame:
    """Every verdict of either run, keyed by (model, dataset, cell, threshold), with both runs'
    estimate and verdict label (the other run's with the suffix ``_other``)."""

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
    return frame(ref).merge(frame(other), on=key, how="outer", suffixes=("", "_other"))


def main() -> None:
    ap = suite_parser(__doc__)
    ap.add_argument("--models", type=Path, default=ROOT / "models.yaml")
    ap.add_argument("--dtype", default="float32", help="the other arm's dtype")
    args = ap.parse_args()
    extra = pytest_args(args)
    with tempfile.TemporaryDirectory(prefix="flipgate-precision-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        load = os.getloadavg()[0]
        changed = models_in(args.dtype, args.models, work / f"models-{args.dtype}.yaml")
        ref = run_suites(work, ["--models", str(args.models), *extra], ORDER_SUITES)
        other = run_suites(work, ["--models", str(changed), *extra], ORDER_SUITES)
        ref_store, other_store = TrialStore.read_only(ref.store), TrialStore.read_only(other.store)
        agreement = readout_agreement(ref_store, other_store)
        verdicts = verdict_table(ref_store, other_store)
        print(f"order suites at the models' own precision vs {args.dtype}, load {load:.2f}")
        for name, run in (("own precision", ref), (args.dtype, other)):
            measured, cached, _ = run.model_work()
            print(
                f"  {name}: {run.wall_s:.0f} s wall, {measured} trials measured by a model, "
                f"{cached} from the response cache"
            )
        print(f"  readout agreement per trial ({args.dtype}'s content label equal to own's):")
        print(agreement.to_string(index=False, float_format="%.3f"))
        flips = verdicts[verdicts.metric.str.startswith("flip_rate")]
        for name, table in (("flip-rate", flips), ("all", verdicts)):
            same = (table.verdict == table.verdict_other).sum()
            print(f"  {name} verdicts identical: {same} of {len(table)}")
        differ = verdicts[verdicts.verdict != verdicts.verdict_other]
        if len(differ):
            print("  verdicts that differ:")
            print(differ.to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main()
