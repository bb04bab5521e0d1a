"""Wall time of the ODI suite's fits (docs/suites/odi.md): the panel fits, each model's own fit and
the version-pair fits, on one simulated table shaped like the default audit's ODI panel.

The table is drawn from the ODI model (flipgate.odi.simulate) and cut to the audit's shape: four
models, three facets, five cells, K=6; m0 runs every cell (28 items each, like SmolLM2), m1 every
cell with half its trials parse failures (like Gemma), m2 and m3 one option-order cell of 4 and 8
items (the NF4 and GGUF builds), with version pairs (m2, m0) and (m3, m0). Each ``--variant`` runs
:func:`flipgate.odi.odi` on the same table in this one process and prints per fit its wall time,
draws per chain and diagnostics, then the total and the machine load (``uptime``).

    python benchmarks/odi_fits.py [--variants before,after] [--before REV] [--seed 0] [--json F]

``before`` runs ``flipgate/odi/fit.py`` as it was at ``--before`` (a git revision; default
56894172, the code before the sampler of flipgate.odi.sampler and the per-model draws
``own_samples``), loaded from git into this process; ``after`` the working tree's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd

from flipgate.odi.simulate import simulate, to_trials

FACETS = {"option_order": 1.0, "evidence_chunk_order": 0.3, "document_rank_order": 0.3}
VERSIONS = [("m2", "m0"), ("m3", "m0")]
#: the fit code before the compiled sampler and own_samples
BEFORE = "56894172c273c6f72ae108de1d5613f1917cdb21"


def fit_module(variant: str, before: str = BEFORE) -> types.ModuleType:
    """The working tree's ``flipgate.odi.fit`` (``after``) or that file at git revision ``before``
    (``before``), executed as a module of its own."""
    if variant == "after":
        return importlib.import_module("flipgate.odi.fit")
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{before}:flipgate/odi/fit.py"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType(f"odi_fit_{before[:8]}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{before[:8]}:flipgate/odi/fit.py", "exec"), module.__dict__)
    return module


def audit_like_table(seed: int = 0) -> pd.DataFrame:
    """A trials table shaped like the default audit's ODI panel (module docstring)."""
    data, _ = simulate(
        n_models=4, sigma_pi=FACETS, datasets=(2, 1, 2), items_per_cell=28, seed=seed
    )
    trials = to_trials(data)
    rng = np.random.default_rng(seed)
    number = trials["item_id"].str.rsplit("/", n=1).str[1].astype(int)
    first_cell = (trials["facet"] == "option_order") & (trials["dataset"] == "d0")
    keep = {
        "m0": np.ones(len(trials), bool),
        "m1": rng.random(len(trials)) < 0.5,
        "m2": first_cell & (number < 4),
        "m3": first_cell & (number < 8),
    }
    mask = np.zeros(len(trials), bool)
    for m, k in keep.items():
        mask |= (trials["model_id"] == m).to_numpy() & np.asarray(k)
    return trials[mask].reset_index(drop=True)


def run(table: pd.DataFrame, variant: str, seed: int, before: str = BEFORE) -> dict:
    """``odi`` of ``variant``'s fit module on ``table``; every fit's wall time, size, draws and
    diagnostics (all judged by the working tree's ``diagnostics``)."""
    rows: list[dict] = []
    module = fit_module(variant, before)
    inner = module.fit

    def timed(data, *args, **kwargs):
        t0, c0 = time.perf_counter(), time.process_time()
        result = inner(data, *args, **kwargs)
        cpu = time.process_time() - c0
        d = fit_module("after").diagnostics(result)
        rows.append(
            {
                "fit": f"{data.outcome}:{'+'.join(data.models)}",
                "trials": data.n,
                "wall_s": round(time.perf_counter() - t0, 2),
                "cpu_s": round(cpu, 2),
                "svi_s": round(result.timings["svi_s"], 2),
                "chains": result.profile.num_chains,
                "draws": result.draws_per_chain,
                "steps": round(result.mean_steps, 1),
                "rhat_max": round(d["rhat_max"], 4),
                "ess_bulk_min": round(d["ess_bulk_min"]),
                "ess_tail_min": round(d["ess_tail_min"]),
                "divergences": d["divergences"],
                "passed": d["passed"],
            }
        )
        return result

    module.fit = timed
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        report = module.odi(table, "sim", seed=seed, versions=VERSIONS)
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        module.fit = inner
    own = {m: v["own"] for m, v in report["models"].items()}
    return {
        "variant": variant,
        "total_s": round(total, 2),
        "cpu_s": round(cpu, 2),
        "fits": rows,
        "own_sigma_delta": {
            m: {f: v["sigma_delta"]["median"] for f, v in o["facets"].items()}
            for m, o in own.items()
        },
        "own_passed": {m: o["passed"] for m, o in own.items()},
        "load": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--variants", default="before,after", help="comma list, repeats allowed")
    ap.add_argument("--before", default=BEFORE, help="git revision of the 'before' fit.py")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args()
    table = audit_like_table(args.seed)
    print(f"table: {len(table)} trials, models {sorted(set(table['model_id']))}", flush=True)
    out = []
    for variant in args.variants.split(","):
        res = run(table, variant, args.seed, args.before)
        out.append(res)
        print(
            f"== {variant}: total {res['total_s']} s wall, {res['cpu_s']} s CPU; {res['load']}",
            flush=True,
        )
        for r in res["fits"]:
            print("   " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
        print(f"   own σ_δ medians: {res['own_sigma_delta']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
