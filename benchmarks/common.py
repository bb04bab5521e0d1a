"""What the benchmark scripts share: the model options and option-order prompts from a dataset,
and a timed ``pytest suites`` run into a scratch folder."""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from flipgate import registry
from flipgate.backends.base import Request
from flipgate.config import load_models
from flipgate.facets import get_facet
from flipgate.grammar import orderings
from flipgate.items import DatasetSpec, load_items
from flipgate.readouts import read_label


def parser(doc: str, n: int) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--models", default="models.yaml")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--dataset", default="mmlu")
    ap.add_argument("--n", type=int, default=n, help="trials per arm")
    ap.add_argument("--cache-dir", default=".flipgate_cache")
    return ap


def model_config(args) -> dict:
    registry.suites()  # declares every suite to flipgate.config, which reads their settings
    return {**load_models(args.models).models[args.model], "_cache_dir": args.cache_dir}


def timed(backend, requests: list[Request]) -> tuple[float, list]:
    """(trials/s, outputs) of one ``complete`` call on ``requests``, after a two-prompt warm-up
    (for a server flipgate starts, also its start)."""
    backend.complete(requests[:2])
    t0 = time.perf_counter()
    outs = backend.complete(requests)
    return len(requests) / (time.perf_counter() - t0), outs


def labels(outs, requests: list[Request], readout: str) -> list[str | None]:
    """Each output's label under ``readout``."""
    return [read_label(readout, o, r.labels, r.answer_prefix) for o, r in zip(outs, requests)]


def option_order_requests(dataset: str, n: int) -> list[Request]:
    """``n`` option-order prompts: K=6 manifest orderings of the first seed-42 items."""
    facet = get_facet("option_order")
    items = load_items(DatasetSpec(dataset), n // 6 + 1, keep=facet.keep)
    return [facet.render(it, p) for it in items for p in orderings(it.item_id, it.n_options, 6)][:n]


ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SuiteRun:
    """One ``pytest suites -n auto`` run: wall seconds, its run store, its output."""

    wall_s: float
    store: Path
    stdout: str
    stderr: str

    def model_work(self) -> tuple[int, int, int]:
        """(trials measured by a model, trials read from the response cache, prompts sent to a
        model: trials, judge and pilot calls) from the run store."""
        with sqlite3.connect(self.store) as conn:
            measured, cached = conn.execute(
                "SELECT SUM(from_cache = 0), SUM(from_cache = 1) FROM trials"
            ).fetchone()
            (calls,) = conn.execute("SELECT SUM(prompts) FROM model_calls").fetchone()
        return measured or 0, cached or 0, calls or 0

    def suite_seconds(self) -> dict[str, float]:
        """Worker seconds per suite folder (facets, controls, regression, analysis, benchmarks)
        from pytest's ``--durations=0`` table (setup, call and teardown)."""
        seconds: dict[str, float] = {}
        for line in self.stdout.splitlines():
            match = re.match(r"\s*([\d.]+)s (setup|call|teardown)\s+suites/(\w+)/", line)
            if match:
                seconds[match[3]] = seconds.get(match[3], 0.0) + float(match[1])
        return seconds


def suite_parser(doc: str) -> argparse.ArgumentParser:
    """Options of a benchmark that runs the suites: ``--items-per-dataset N``, ``--keep DIR``
    (work there, kept, instead of in a temporary folder) and pytest arguments after ``--``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--items-per-dataset", type=int, default=None)
    ap.add_argument(
        "--keep", type=Path, default=None, help="work here (kept) instead of a temp dir"
    )
    ap.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    return ap


def pytest_args(args: argparse.Namespace) -> list[str]:
    """The pytest arguments that :func:`suite_parser`'s options stand for."""
    extra = list(args.extra)
    if args.items_per_dataset:
        extra += ["--items-per-dataset", str(args.items_per_dataset)]
    return extra


def scratch_cache(work: Path) -> Path:
    """``work/cache``, an empty response cache that shares the dequantised model weights of
    ``.flipgate_cache/models`` (one-time setup, timed by no benchmark)."""
    cache = work / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    models = ROOT / ".flipgate_cache" / "models"
    if models.exists() and not (cache / "models").exists():
        (cache / "models").symlink_to(models)
    return cache


def run_suites(work: Path, extra: list[str], targets: tuple[str, ...] = ("suites",)) -> SuiteRun:
    """Run ``pytest TARGETS -n auto`` with its cache, runs, cards and manifests under ``work``;
    exits with pytest's output unless pytest exits 0 or 1 (1: a gate failed, as the default
    audit's does)."""
    runs = work / "runs"
    before = set(runs.glob("*")) if runs.exists() else set()
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *targets,
        "-n",
        "auto",
        "-q",
        "--durations=0",
        "--cache-dir",
        str(scratch_cache(work)),
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
    if proc.returncode not in (0, 1):
        sys.exit(f"pytest failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    (run,) = set(runs.glob("*")) - before
    return SuiteRun(wall, run / "trials.sqlite", proc.stdout, proc.stderr)
