"""Trials/s of the litellm backend at concurrency 1 vs 16 against the loopback OpenAI-compatible server.

The server (flipgate.serve) serves the embedded SmolLM2 with dynamic batching, so concurrent
requests share forward passes; ``--latency-s`` adds a fixed per-request delay in the server
(like a network round trip) to show what concurrency buys against a remote provider. Same
prompts, same server, same run; the response cache is not used.
    python benchmarks/api_concurrency.py [--n 64] [--levels 1,16] [--latency-s 0.2]
"""
from __future__ import annotations

import argparse
import os
import time

from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.hf import HFBackend
from flipgate.config import load_models
from flipgate.facets import get_facet
from flipgate.grammar import orderings
from flipgate.items import DatasetSpec, load_items
from flipgate.readouts import read_label
from flipgate.serve import Faults, LoopbackServer


def rate(server: LoopbackServer, requests, concurrency: int) -> tuple[float, list]:
    backend = LiteLLMBackend({"id": "bench", "backend": "litellm", "readouts": ["regex"], "concurrency": concurrency,
                              "max_new_tokens": 6, "source": {"model": "openai/bench", "api_base": server.base_url,
                                                              "api_key_env": "FLIPGATE_BENCH_KEY"}})
    backend.complete(requests[:2])  # warm-up (connections, litellm import paths)
    t0 = time.perf_counter()
    outs = backend.complete(requests)
    return len(requests) / (time.perf_counter() - t0), outs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="models.yaml")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--n", type=int, default=64, help="trials per arm")
    ap.add_argument("--levels", default="1,16", help="concurrency levels, comma-separated")
    ap.add_argument("--latencies", default="0,0.2", help="added server-side delays per request (s), comma-separated")
    ap.add_argument("--cache-dir", default=".flipgate_cache")
    args = ap.parse_args()

    os.environ["FLIPGATE_BENCH_KEY"] = "bench-key"
    local = HFBackend({**load_models(args.models).models[args.model], "_cache_dir": args.cache_dir,
                       "readouts": ["regex"], "batch_size": 16})
    facet = get_facet("option_order")
    items = load_items(DatasetSpec("mmlu"), args.n // 6 + 1, keep=facet.keep)
    requests = [facet.render(it, p) for it in items for p in orderings(it.item_id, it.n_options, 6)][: args.n]
    levels = [int(x) for x in args.levels.split(",")]
    print(f"model {args.model} behind flipgate.serve (dynamic batching, max 16), {len(requests)} trials per arm")
    for latency in (float(x) for x in args.latencies.split(",")):
        faults = Faults(slow=1.0, slow_s=latency) if latency else Faults()
        server = LoopbackServer(local, api_key="bench-key", faults=faults, max_batch=16)
        server.start()
        results = {c: rate(server, requests, c) for c in levels}
        server.stop()
        base = results[levels[0]][0]
        answers = {c: [read_label("regex", o, r.labels, r.answer_prefix) for o, r in zip(outs, requests)]
                   for c, (_, outs) in results.items()}
        print(f" added latency {latency:g} s/request (server batch sizes: mean "
              f"{sum(server.batcher.batches) / len(server.batcher.batches):.1f}, max {max(server.batcher.batches)})")
        for c, (r, _) in results.items():
            same = sum(a == b for a, b in zip(answers[c], answers[levels[0]]))
            print(f"  concurrency {c:3d}: {r:7.2f} trials/s   x{r / base:5.2f} vs concurrency {levels[0]}   "
                  f"answers equal to concurrency {levels[0]}: {same}/{len(requests)}")


if __name__ == "__main__":
    main()
