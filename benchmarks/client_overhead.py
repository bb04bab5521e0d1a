"""CPU per request and requests/s of flipgate's API client itself, against a zero-work
OpenAI-compatible server, and the time from a process's start to its first request.

The server (tests/support/zero_server.py) runs in its own process and answers every request at
once with a precomputed reply ("Answer: B"; with logprobs, one position of top log-probs), after
``--latencies`` seconds of added delay, so what is measured is the client: CPU ms per request of
this process (``time.process_time`` around one ``complete`` call after a warm-up call, divided by
the requests) and requests/s (wall). Arms, side by side in one run, at each latency and
concurrency: ``raw aiohttp`` (one ClientSession kept across calls, posting the same bodies and
parsing the replies: the floor), ``direct`` (LiteLLMBackend on an ``openai/`` entry with
``api_base``: the direct aiohttp client), ``litellm`` (the same entry with ``client: litellm``)
and both again with logprobs (``letter_logprob``). At a latency above 0 and concurrency 1 each
arm sends ``--n`` / 8 requests (the table marks it). Start to first request: a fresh interpreter
that builds the backend and completes one request, from just before its start to the server's
first POST (wall clock in both processes, median of ``--starts``), for ``direct`` and
``litellm``. The target checks are printed last.
    python benchmarks/client_overhead.py [--n 512] [--levels 1,8,64] [--latencies 0,0.1]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import option_order_requests, parser

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.zero_server import ZeroServer  # noqa: E402

from flipgate.backends.api import LiteLLMBackend  # noqa: E402
from flipgate.backends.base import Request  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "FLIPGATE_BENCH_KEY"
#: (arm, client cfg key or None, logprobs)
BACKEND_ARMS = [
    ("direct", None, False),
    ("litellm", "litellm", False),
    ("direct+logprobs", None, True),
    ("litellm+logprobs", "litellm", True),
]
#: the targets: CPU ms/request of direct (without, with logprobs); direct req/s / raw req/s at
#: latency 0.1 s and concurrency 64; start to first request (s)
TARGET_CPU_MS, TARGET_CPU_MS_LOGPROBS, TARGET_RATE_RATIO, TARGET_START_S = 1.0, 1.5, 0.9, 1.5


def entry(base_url: str, concurrency: int, client: str | None, logprobs: bool) -> dict:
    cfg: dict = {
        "id": "bench",
        "backend": "litellm",
        "readouts": ["regex", "letter_logprob"] if logprobs else ["regex"],
        "concurrency": concurrency,
        "max_new_tokens": 6,
        "source": {
            "model": "openai/bench",
            "api_base": base_url,
            "api_key_env": KEY_ENV,
            "revision": "bench",  # a declared identity: no probe of the server
        },
    }
    if client:
        cfg["client"] = client
    if logprobs:
        cfg["capabilities"] = {"logprobs": True}
    return cfg


def client_of(backend) -> str:
    """What the backend says it calls through (``backend.client``), or that it says nothing (the
    code before the direct path: litellm)."""
    return getattr(backend, "client", None) or "litellm (no .client)"


def measured(run, n: int, server: ZeroServer) -> dict:
    """CPU ms/request and req/s of ``run()`` (one batch of ``n``) and what the server saw."""
    server.reset()
    cpu0 = server.stats()["cpu_s"]
    c0, t0 = time.process_time(), time.perf_counter()
    outs = run()
    c1, t1 = time.process_time(), time.perf_counter()
    stats = server.stats()
    assert stats["requests"] == n, f"the server saw {stats['requests']} requests, not {n}"
    return {
        "cpu_ms": 1000 * (c1 - c0) / n,
        "rate": n / (t1 - t0),
        "max_in_flight": stats["max_in_flight"],
        "server_cpu_ms": 1000 * (stats["cpu_s"] - cpu0) / n,
        "outs": outs,
    }


def backend_arm(server, requests, concurrency, client, logprobs) -> dict:
    backend = LiteLLMBackend(entry(server.base_url, concurrency, client, logprobs))
    try:
        backend.complete(requests[:2])  # warm-up: imports, first-call paths, a connection
        result = measured(lambda: backend.complete(requests), len(requests), server)
    finally:
        if hasattr(backend, "close"):  # the direct client's connections and loop
            backend.close()
    outs = result.pop("outs")
    bad = sum(o.text.strip() != "Answer: B" or bool(o.notes) for o in outs)
    if logprobs:
        bad += sum("B" not in o.label_logprobs for o in outs)
    assert not bad, f"{bad} of {len(outs)} outputs are not the server's reply"
    result["client"] = client_of(backend)
    return result


def bodies(requests: list[Request]) -> list[dict]:
    return [
        {
            "model": "bench",
            "messages": [{"role": role, "content": text} for role, text in r.messages],
            "max_tokens": 6,
        }
        for r in requests
    ]


class RawClient:
    """The floor: one aiohttp ClientSession (TCPConnector(limit=c)) on one event loop, kept from
    batch to batch as the direct client keeps its own; a batch posts each request's body (model,
    messages, max_tokens) under a Semaphore(c) and parses each reply's JSON."""

    def __init__(self, base_url: str, concurrency: int):
        self.url, self.concurrency = base_url + "/chat/completions", concurrency
        self.headers = {"Authorization": f"Bearer {os.environ[KEY_ENV]}"}
        self.runner = asyncio.Runner()
        self.session = self.runner.run(self._open())

    async def _open(self):
        import aiohttp

        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.concurrency))

    async def _batch(self, requests: list[Request]) -> list[dict]:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(payload: dict) -> dict:
            async with gate:
                async with self.session.post(self.url, json=payload, headers=self.headers) as resp:
                    resp.raise_for_status()
                    return json.loads(await resp.read())

        return await asyncio.gather(*(one(p) for p in bodies(requests)))

    def complete(self, requests: list[Request]) -> list[dict]:
        return self.runner.run(self._batch(requests))

    def close(self) -> None:
        self.runner.run(self.session.close())
        self.runner.close()


def raw_arm(server, requests, concurrency) -> dict:
    raw = RawClient(server.base_url, concurrency)
    try:
        raw.complete(requests[:2])  # warm-up
        result = measured(lambda: raw.complete(requests), len(requests), server)
    finally:
        raw.close()
    outs = result.pop("outs")
    assert all(o["choices"][0]["message"]["content"] == "Answer: B" for o in outs)
    result["client"] = "aiohttp"
    return result


START_CODE = """
from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request
backend = LiteLLMBackend({cfg!r})
out = backend.complete([Request(messages=(("user", "Which letter? A, B, C or D"),),
                                labels=("A", "B", "C", "D"))])
assert out[0].text.strip() == "Answer: B", out
print(getattr(backend, "client", None) or "litellm (no .client)")
"""


def start_to_first_request(server: ZeroServer, client: str | None) -> tuple[float, str]:
    """Seconds from just before a fresh interpreter's start to the server's first POST from it
    (wall clock in both processes), and the client it says it used."""
    code = START_CODE.format(cfg=entry(server.base_url, 1, client, False))
    server.reset()
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-P", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    if proc.returncode:
        sys.exit(f"the start-to-first-request process failed:\n{proc.stderr[-3000:]}")
    first = server.stats()["first_request_wall"]
    return first - t0, (proc.stdout.strip().splitlines() or ["?"])[-1]


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")),
        "unknown CPU",
    )
    bf16 = "avx512_bf16" if "avx512_bf16" in cpuinfo else "no avx512_bf16"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{model}, {os.cpu_count()} cores, {bf16}; load average {load}"


def main() -> None:
    ap = parser(__doc__, 512)
    ap.add_argument("--levels", default="1,8,64", help="concurrency levels, comma-separated")
    ap.add_argument(
        "--latencies", default="0,0.1", help="added server delays per request (s), comma-separated"
    )
    ap.add_argument("--starts", type=int, default=3, help="runs of start to first request per arm")
    args = ap.parse_args()
    os.environ[KEY_ENV] = "bench-key"
    levels = [int(x) for x in args.levels.split(",")]
    latencies = [float(x) for x in args.latencies.split(",")]
    print(f"machine: {machine()}")
    print(f"python {sys.version.split()[0]}; zero-work server in its own process")
    requests = option_order_requests(args.dataset, args.n)
    print(f"{len(requests)} {args.dataset} option-order prompts per arm\n")

    results: dict[tuple[float, int, str], dict] = {}
    header = (
        f"{'latency':>7} {'conc':>4} {'n':>5}  {'arm':<17} {'client':<21} {'CPU ms/req':>10} "
        f"{'x raw':>6} {'req/s':>8} {'x raw':>6} {'in flight':>9} {'srv ms/req':>10}"
    )
    print(header)
    print("-" * len(header))
    for latency in latencies:
        with ZeroServer(latency_s=latency) as server:
            for c in levels:
                n = len(requests) // 8 if latency > 0 and c == 1 else len(requests)
                batch = requests[:n]
                arms = {"raw aiohttp": raw_arm(server, batch, c)}
                for name, client, logprobs in BACKEND_ARMS:
                    arms[name] = backend_arm(server, batch, c, client, logprobs)
                raw = arms["raw aiohttp"]
                for name, r in arms.items():
                    results[latency, c, name] = {**r, "n": n}
                    print(
                        f"{latency:>7g} {c:>4} {n:>5}{'*' if n < len(requests) else ' '} "
                        f"{name:<17} {r['client']:<21} {r['cpu_ms']:>10.3f} "
                        f"{r['cpu_ms'] / raw['cpu_ms']:>6.2f} {r['rate']:>8.1f} "
                        f"{r['rate'] / raw['rate']:>6.2f} {r['max_in_flight']:>9} "
                        f"{r['server_cpu_ms']:>10.3f}"
                    )
    if any(lat > 0 for lat in latencies) and 1 in levels:
        print(f"* n = {len(requests)} // 8 at concurrency 1 with added latency (run time)")
    print(
        "CPU ms/req: this process's CPU over the batch / n (with the fixed cost of the call: "
        "event loop, client, connections); in flight: the most requests the server's handler "
        "held at once (at latency 0 a handler that has the whole body never waits, so 1); "
        "srv ms/req: the server process's CPU / n\n"
    )

    starts: dict[str, float] = {}
    with ZeroServer() as server:
        for name, client in (("direct", None), ("litellm", "litellm")):
            runs = [start_to_first_request(server, client) for _ in range(args.starts)]
            starts[name] = statistics.median(s for s, _ in runs)
            print(
                f"start to first request, {name:<7} (client {runs[0][1]}): median "
                f"{starts[name]:.2f} s of {', '.join(f'{s:.2f}' for s, _ in runs)}"
            )
    print(f"\nmachine after the run: load average {os.getloadavg()[0]:.2f}")

    def worst(arm: str) -> tuple[float, str]:
        """The most CPU ms/request of ``arm`` over the cells of n requests (a smaller batch
        spreads the fixed cost of a ``complete`` call, its loop and client, over fewer)."""
        cells = [
            (r["cpu_ms"], f"latency {lat:g} s, c={c}")
            for (lat, c, a), r in results.items()
            if a == arm and r["n"] == len(requests)
        ]
        return max(cells or [(r["cpu_ms"], "") for (_, _, a), r in results.items() if a == arm])

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    clients = {r["client"] for (_, _, a), r in results.items() if a.startswith("direct")}
    print(
        "targets"
        + (
            ""
            if clients == {"direct"}
            else f" (the 'direct' arms ran through {', '.join(sorted(clients))})"
        )
        + ":"
    )
    for arm, target in (("direct", TARGET_CPU_MS), ("direct+logprobs", TARGET_CPU_MS_LOGPROBS)):
        ms, where = worst(arm)
        print(
            f"  CPU ms/request {arm} <= {target:g}: worst {ms:.3f} over cells of n requests "
            f"({where}): "
            f"{verdict(ms <= target)}"
        )
    if (0.1, 64, "direct") in results:
        ratio = results[0.1, 64, "direct"]["rate"] / results[0.1, 64, "raw aiohttp"]["rate"]
        print(
            f"  latency 0.1 s, c=64: direct req/s >= {TARGET_RATE_RATIO:g} x raw: "
            f"{ratio:.2f} x raw: {verdict(ratio >= TARGET_RATE_RATIO)}"
        )
    else:
        print(
            "  latency 0.1 s, c=64: direct req/s vs raw: not measured (see --levels, --latencies)"
        )
    print(
        f"  start to first request direct <= {TARGET_START_S:g} s: {starts['direct']:.2f} s: "
        f"{verdict(starts['direct'] <= TARGET_START_S)}"
    )


if __name__ == "__main__":
    main()
