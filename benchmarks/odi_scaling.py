"""ODI inference profiles side by side: wall time, convergence and recovery error per data scale.

Each (scale, profile) cell simulates data from the ODI model with known truth (flipgate.odi.SCALES:
small 4 models x 2 facets x 40 items; medium 8 x 3 facets x 2 datasets x 100 items; paper 18 models,
5 facets, 12 cells, 3,600 items, ~390k trials; K=6), fits it and prints one table row.
    python benchmarks/odi_scaling.py [--scales small,medium] [--profiles fast,full] [--seeds 0]
A profile may carry overrides of its fields, ``name:field=value:…``: ``--profiles
fast,fast:num_samples=1500`` runs the default beside the same profile started at 1,500 draws.
On a 2-core CPU, `fast` at paper scale takes about 19 min and 9.6 GB; `full` beyond small takes
hours.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from flipgate.odi import PROFILES, SCALES, simulate_scale, summarize
from flipgate.odi.fit import Profile, fit

COLUMNS = [
    "scale",
    "profile",
    "seed",
    "trials",
    "wall_s",
    "svi_s",
    "draws",
    "steps",
    "rhat_max",
    "ess_bulk",
    "ess_tail",
    "div",
    "passed",
    "worst_ess",
    "sigma_pi_err",
    "theta_rmse",
    "delta_rmse",
]


def recovery(summary: dict, truth: dict, data) -> dict[str, float]:
    """Recovery errors: max |log(σ_π estimate / truth)| over facets, θ RMSE, and the RMSE of the
    cells' mean |δ| estimates."""
    sp = np.array([summary["facets"][f]["sigma_pi"]["median"] for f in data.facets])
    th = np.array([summary["models"][m]["theta"]["median"] for m in data.models])
    md = np.array(
        [summary["cells"][f"{f}/{d}"]["mean_abs_delta"]["estimate"] for f, d in data.cells]
    )
    return {
        "sigma_pi_err": float(np.abs(np.log(sp / truth["sigma_pi"])).max()),
        "theta_rmse": float(np.sqrt(np.mean((th - truth["theta"]) ** 2))),
        "delta_rmse": float(np.sqrt(np.mean((md - truth["mean_abs_delta"]) ** 2))),
    }


def parse_profile(spec: str) -> tuple[str, dict[str, float]]:
    """``name:field=value:…`` → (name, overrides); a value is an int where it reads as one.
    ValueError names the override that is not a numeric field of :class:`Profile`."""
    name, *fields = spec.split(":")
    known = {f.name for f in dataclasses.fields(Profile)} - {"name"}
    overrides: dict[str, float] = {}
    for field in fields:
        key, _, value = field.partition("=")
        if key not in known:
            raise ValueError(f"--profiles {spec!r}: {key!r} is not a profile field {sorted(known)}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"--profiles {spec!r}: {key}={value!r} is not a number") from None
        overrides[key] = int(number) if number.is_integer() and "." not in value else number
    return name, overrides


def row(scale: str, profile: str, seed: int) -> dict:
    data, truth = simulate_scale(scale, seed=seed)
    name, overrides = parse_profile(profile)
    result = fit(data, name, seed=seed, **overrides)
    summary = summarize(result)
    d = summary["diagnostics"]
    return {
        "scale": scale,
        "profile": profile,
        "seed": seed,
        "trials": data.n,
        "wall_s": result.timings["total_s"],
        "svi_s": result.timings["svi_s"],
        "draws": result.draws_per_chain,
        "steps": result.mean_steps,
        "rhat_max": d["rhat_max"],
        "ess_bulk": d["ess_bulk_min"],
        "ess_tail": d["ess_tail_min"],
        "div": d["divergences"],
        "passed": d["passed"],
        "worst_ess": d["worst"]["ess_bulk"],
        **recovery(summary, truth, data),
    }


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.0f}"
    return str(value)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scales", default="small,medium", help=f"comma list of {list(SCALES)}")
    ap.add_argument(
        "--profiles",
        default="fast,full",
        help=f"comma list of {list(PROFILES)}, each with optional :field=value overrides",
    )
    ap.add_argument("--seeds", default="0", help="comma list of seeds (data and chains)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    scales, profiles = args.scales.split(","), args.profiles.split(",")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds {args.seeds!r} is not a comma list of integers")
    try:
        names = [parse_profile(p)[0] for p in profiles]
    except ValueError as e:
        ap.error(str(e))
    for name, known, given in (("scale", SCALES, scales), ("profile", PROFILES, names)):
        bad = [x for x in given if x not in known]
        if bad:
            ap.error(f"unknown {name}(s) {bad}; choose from {list(known)}")
    print(" | ".join(f"{c:>12s}" for c in COLUMNS), flush=True)
    rows = []
    for scale in scales:
        for seed in seeds:
            for profile in profiles:
                rows.append(row(scale, profile, seed))
                print(" | ".join(f"{fmt(rows[-1][c]):>12s}" for c in COLUMNS), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
