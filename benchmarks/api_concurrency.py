"""Trials/s of the litellm backend at concurrency 1 vs 16 against the loopback OpenAI-compatible
server.

The server (tests/support/loopback_server.py, the tests' own) serves the embedded SmolLM2 with
dynamic batching, so concurrent requests share forward passes; ``--latency-s`` adds a fixed
per-request delay in the server (like a network round trip) to show what concurrency buys
against a remote provider. Same prompts, same server, same run; the response cache is not used.
    python benchmarks/api_concurrency.py [--n 64] [--levels 1,16] [--latency-s 0.2]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from common import model_config, option_order_requests, parser

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.loopback_server import Faults, LoopbackServer  # noqa: E402

from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.hf import HFBackend
from flipgate.readouts import read_label


def rate(server: LoopbackServer, requests, concurrency: int) -> tuple[float, list]:
    backend = LiteLLMBackend(
        {
            "id": "bench",
            "backend": "litellm",
            "readouts": ["regex"],
            "concurrency": concurrency,
            "max_new_tokens": 6,
            "source": {
                "model": "openai/bench",
                "api_base": server.base_url,
                "api_key_env": "FLIPGATE_BENCH_KEY",
            },
        }
    )
    backend.complete(requests[:2])  # warm-up (connections, litellm import paths)
    t0 = time.perf_counter()
    outs = backend.complete(requests)
    return len(requests) / (time.perf_counter() - t0), outs


def main() -> None:
    ap = parser(__doc__, 64)
    ap.add_argument("--levels", default="1,16", help="concurrency levels, comma-separated")
    ap.add_argument(
        "--latencies",
        default="0,0.2",
        help="added server-side delays per request (s), comma-separated",
    )
    args = ap.parse_args()

    os.environ["FLIPGATE_BENCH_KEY"] = "bench-key"
    local = HFBackend({**model_config(args), "readouts": ["regex"], "batch_size": 16})
    requests = option_order_requests(args.dataset, args.n)
    levels = [int(x) for x in args.levels.split(",")]
    print(
        f"model {args.model} behind the loopback server (dynamic batching, max 16), "
        f"{len(requests)} trials per arm"
    )
    for latency in (float(x) for x in args.latencies.split(",")):
        faults = Faults(slow=1.0, slow_s=latency) if latency else Faults()
        server = LoopbackServer(local, api_key="bench-key", faults=faults, max_batch=16)
        server.start()
        results = {c: rate(server, requests, c) for c in levels}
        server.stop()
        base = results[levels[0]][0]
        answers = {
            c: [read_label("regex", o, r.labels, r.answer_prefix) for o, r in zip(outs, requests)]
            for c, (_, outs) in results.items()
        }
        print(
            f" added latency {latency:g} s/request (server batch sizes: mean "
            f"{sum(server.batcher.batches) / len(server.batcher.batches):.1f}, "
            f"max {max(server.batcher.batches)})"
        )
        for c, (r, _) in results.items():
            same = sum(a == b for a, b in zip(answers[c], answers[levels[0]]))
            print(
                f"  concurrency {c:3d}: {r:7.2f} trials/s   x{r / base:5.2f} "
                f"vs concurrency {levels[0]}   "
                f"answers equal to concurrency {levels[0]}: {same}/{len(requests)}"
            )


if __name__ == "__main__":
    main()
