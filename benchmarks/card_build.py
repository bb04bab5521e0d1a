"""Controller time to write GRID cards: summaries read from the run store (each cell's test stored
them) vs recomputed from the trials (what the controller did before), side by side in one run.

The run is the golden audit of tests/golden (two replayed model versions, three datasets, facet
and control cells, regression, ODI), run once with pytest into a temporary directory.
    python benchmarks/card_build.py [--repeats 3] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def audit(tmp: Path, bootstrap: int) -> Path:
    """The golden audit (tests/integration/test_golden_cards.py) with ``bootstrap`` resamples;
    its store."""
    from support.golden_audit import GOLDEN, THRESHOLDS, models_yaml
    from support.paths import write

    source = 'backend: replay, source: {{path: "{}"}}'
    models = models_yaml(
        tmp / "models.yaml",
        source.format(GOLDEN / "replay" / "tiny-v1.jsonl"),
        source.format(GOLDEN / "replay" / "tiny-v2.jsonl"),
    )
    text = models.read_text().replace("bootstrap: {n: 200}", f"bootstrap: {{n: {bootstrap}}}")
    models.write_text(text)
    thresholds = write(tmp / "thresholds" / "default.yaml", THRESHOLDS).parent
    cmd = [sys.executable, "-m", "pytest", str(REPO / "suites"), "--ignore",
           str(REPO / "suites" / "envelope"), "--models", str(models), "--thresholds",
           str(thresholds), "--cache-dir", str(tmp / "cache"), "--runs-dir", str(tmp / "runs"),
           "--grid-cards-dir", str(tmp / "cards"), "--manifests-dir", str(tmp / "manifests"),
           "-q", "-p", "no:randomly"]  # fmt: skip
    subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO)
    return next((tmp / "runs").iterdir()) / "trials.sqlite"


def timed(store_path: Path, out: Path, bootstrap: int, repeats: int) -> float:
    """Best-of-``repeats`` seconds for write_cards on the store."""
    from flipgate import registry
    from flipgate.cards import write_cards
    from flipgate.store import TrialStore

    best = float("inf")
    for _ in range(repeats):
        store = TrialStore(store_path)
        start = time.perf_counter()
        write_cards(store, out, "bench", n_boot=bootstrap, suites=registry.suites())
        best = min(best, time.perf_counter() - start)
        store.conn.close()
    return best


def without_run(path: Path) -> dict:
    """A card without its run section (run id, timestamp, store path)."""
    card = json.loads(path.read_text())
    card.pop("run")
    return card


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        stored = audit(tmp, args.bootstrap)
        recomputed = tmp / "recomputed.sqlite"
        shutil.copy(stored, recomputed)
        with sqlite3.connect(recomputed) as conn:  # as if no cell had stored its summaries
            conn.execute("DELETE FROM cell_summaries")
        cells = sqlite3.connect(stored).execute("SELECT COUNT(*) FROM cell_summaries").fetchone()
        read = timed(stored, tmp / "cards-read", args.bootstrap, args.repeats)
        again = timed(recomputed, tmp / "cards-again", args.bootstrap, args.repeats)
        same = all(
            without_run(tmp / "cards-read" / p.relative_to(tmp / "cards-again")) == without_run(p)
            for p in (tmp / "cards-again").glob("*/*.json")
        )
    print(
        f"write_cards, golden audit ({cells[0]} stored (cell, readout) summaries, bootstrap "
        f"n={args.bootstrap}, best of {args.repeats}):"
    )
    print(f"  summaries recomputed from trials: {again:7.3f} s")
    print(f"  summaries read from the store:    {read:7.3f} s   x{again / read:5.2f} faster")
    print(f"  cards identical but for their run section: {same}")


if __name__ == "__main__":
    main()
