"""``python -m flipgate prepare``: the one-time work before a first audit of models.yaml. Each
local (``hf``) model is loaded once: a GGUF is dequantised and saved under
``<cache-dir>/models`` (about 20 s for SmolLM2-135M, 50 s for Gemma 3 270M on 2 cores, then
0.3–5 s a load), a hub model is downloaded, and the backend's fingerprint is stored. ``make
setup`` runs it, so that a cold audit times inference, not conversion (docs/engine.md).
"""

from __future__ import annotations

import time

from flipgate.cli import OK, Parser, run_command
from flipgate.config import load_models


def prepare(models: str, cache_dir: str) -> list[tuple[str, float]]:
    """Load every ``hf`` model of ``models`` once with ``cache_dir`` as its cache; (model id,
    seconds) for each, in file order."""
    from flipgate.backends.hf import HFBackend

    done = []
    for model_id, cfg in load_models(models).models.items():
        if cfg["backend"] != "hf":
            continue
        t0 = time.perf_counter()
        HFBackend({**cfg, "_cache_dir": cache_dir})
        done.append((model_id, time.perf_counter() - t0))
    return done


def _prepare(argv: list[str]) -> int:
    p = Parser(
        prog="python -m flipgate prepare",
        description="Dequantise (GGUF) or download (hub) every local model of models.yaml once "
        "and store its fingerprint, so the first audit makes no conversion.",
    )
    p.add_argument("--models", default="models.yaml", help="models file (default: models.yaml)")
    p.add_argument(
        "--cache-dir",
        default=".flipgate_cache",
        help="the audit's --cache-dir (default: .flipgate_cache)",
    )
    args = p.parse_args(argv)
    for model_id, seconds in prepare(args.models, args.cache_dir):
        print(f"flipgate prepare: {model_id} ready ({seconds:.1f} s)")
    return OK


def prepare_main(argv: list[str] | None = None) -> int:
    return run_command(_prepare, argv)
