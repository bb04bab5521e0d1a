"""Trials/s of the local engine's batching options vs a naive one-prompt-at-a-time generate loop,
float32 vs bfloat16, and whether their answers equal the naive loop's, on each CPU class.

Same model, same prompts, one run: facet prompts (K=6 option orderings per item) and control
prompts (the canonical ordering K times). Arms, all float32 unless named: the naive loop (batch
1, every prompt computed whole), batched (prompts computed whole, sorted by length), the engine's
prefix tree (docs/engine.md), that in bfloat16, and that in ``dtype: auto`` (which of the two it
picked is printed). Default model: the embedded SmolLM2-135M-Instruct.

CPU classes: ``native`` is this machine as it is; ``avx2`` emulates a CPU without bf16
instructions (as GitHub-hosted runners have) on this one: torch's CPU kernels at AVX2
(``ATEN_CPU_CAPABILITY=avx2``), oneDNN capped at AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2``) and MKL, which
computes torch's float32 matrix products, capped at AVX2 (``MKL_ENABLE_INSTRUCTIONS=AVX2``; the
first two leave MKL's AVX-512 kernels on). All three are read when the libraries load, so each
class runs in a process of its own, one after the other. Each class also prints its float32
matrix-product rate on one thread: the arithmetic the engine spends most of its time in (about
70% in a profile), and what tells an emulated class from a real one. The emulation caps
instruction sets, not the machine: a real AVX2 CPU may be slower still (docs/engine.md).
    python benchmarks/engine_throughput.py [--n 96] [--batch-size 64] [--classes native,avx2]
        [--tree-only] [--models models.yaml --model ID]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import labels, model_config, option_order_requests, parser, timed

from flipgate.backends.base import Request
from flipgate.backends.hf import HFBackend

READOUTS = ("regex", "letter_logprob")
#: environment of each CPU class (docs/benchmarks.md, "CPU classes")
CPU_CLASSES = {
    "native": {},
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
}


def matmul_gflops(seconds: float = 2.0) -> float:
    """float32 GFLOP/s of one thread on a matrix product of a decode batch's shape (512 rows
    through a 576 x 1536 projection, SmolLM2-135M's MLP)."""
    import time

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    a, b = torch.randn(512, 576), torch.randn(576, 1536)
    for _ in range(3):
        a @ b
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        n += 1
    rate = 2 * 512 * 576 * 1536 * n / (time.perf_counter() - t0) / 1e9
    torch.set_num_threads(threads)
    return rate


def control_requests(facet_requests: list[Request], k: int = 6) -> list[Request]:
    """The same-ordering control's prompts: each item's first ordering, K times."""
    return [r for r in facet_requests[::k] for _ in range(k)]


def measure(args) -> dict:
    """This process's CPU class: per prompt set, each arm's trials/s and agreement with the
    reference arm (the naive loop, or float32's prefix tree with ``--tree-only``)."""
    import torch

    cfg = {**model_config(args), "readouts": list(READOUTS), "dtype": "float32"}
    bs = args.batch_size
    arms: dict[str, HFBackend] = {}
    if not args.tree_only:
        arms["naive generate loop (bs=1)"] = HFBackend(
            {**cfg, "batch_size": 1, "prefix_sharing": False}
        )
        arms[f"batched (bs={bs})"] = HFBackend({**cfg, "batch_size": bs, "prefix_sharing": False})
    tree, tree_bf16 = f"prefix tree (bs={bs})", f"prefix tree, bf16 (bs={bs})"
    arms[tree] = HFBackend({**cfg, "batch_size": bs})
    arms[tree_bf16] = HFBackend({**cfg, "batch_size": bs, "dtype": "bfloat16"})
    auto = HFBackend({**cfg, "batch_size": bs, "dtype": "auto"})
    arms[f"prefix tree, auto -> {auto.dtype} (bs={bs})"] = auto
    facet = option_order_requests(args.dataset, args.n)
    result: dict = {
        "torch_cpu_kernels": torch.backends.cpu.get_cpu_capability(),
        "matmul_gflops": matmul_gflops(),
        "auto": auto.precision.why,
        "prompts": {},
    }
    for kind, requests in {"facet": facet, "control": control_requests(facet)}.items():
        timings = {name: timed(backend, requests) for name, backend in arms.items()}
        reference = next(iter(timings))
        ref_rate, ref_outs = timings[reference]
        ref_labels = {r: labels(ref_outs, requests, r) for r in READOUTS}
        rows = []
        for name, (rate, outs) in timings.items():
            agree = [
                sum(a == b for a, b in zip(labels(outs, requests, r), ref_labels[r]))
                / len(requests)
                for r in READOUTS
            ]
            rows.append({"arm": name, "rate": rate, "x": rate / ref_rate, "agree": agree})
        result["prompts"][kind] = {
            "reference": reference,
            "rows": rows,
            "bf16_over_float32": timings[tree_bf16][0] / timings[tree][0],
        }
    return result


def run_class(name: str, argv: list[str]) -> dict:
    """Measure one CPU class in a process of its own (its environment is read when torch loads)."""
    env = {**os.environ, **CPU_CLASSES[name]}
    for var in set().union(*CPU_CLASSES.values()) - CPU_CLASSES[name].keys():
        env.pop(var, None)  # "native" means this machine as it is
    done = subprocess.run(
        [sys.executable, __file__, *argv, "--measure-this-process"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = parser(__doc__, 96)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--classes", default="native,avx2", help="CPU classes, comma-separated")
    ap.add_argument(
        "--tree-only", action="store_true", help="only the prefix-tree arms (float32 reference)"
    )
    ap.add_argument("--measure-this-process", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_this_process:
        print(json.dumps(measure(args)))
        return
    argv = [
        *("--models", args.models, "--model", args.model, "--dataset", args.dataset),
        *("--n", str(args.n), "--cache-dir", args.cache_dir, "--batch-size", str(args.batch_size)),
        *(["--tree-only"] if args.tree_only else []),
    ]
    classes = [c.strip() for c in args.classes.split(",") if c.strip()]
    unknown = sorted(set(classes) - CPU_CLASSES.keys())
    if unknown:
        sys.exit(f"--classes: unknown CPU class {unknown} (known: {', '.join(CPU_CLASSES)})")
    results = {name: run_class(name, argv) for name in classes}
    print(f"model {args.model}, {args.n} trials per arm and prompt set, {args.dataset}")
    print("  agreement = share of trials whose readout equals the reference arm's (the first)")
    for name, result in results.items():
        env = " ".join(f"{k}={v}" for k, v in CPU_CLASSES[name].items()) or "as it is"
        print(
            f"CPU class {name} ({env}): torch CPU kernels {result['torch_cpu_kernels']}; "
            f"float32 matrix product {result['matmul_gflops']:.1f} GFLOP/s on one thread; "
            f"{result['auto']}"
        )
        for kind, table in result["prompts"].items():
            print(f"  {kind} prompts:")
            for row in table["rows"]:
                print(
                    f"    {row['arm']:44s} {row['rate']:6.2f} trials/s  x{row['x']:5.2f}"
                    f"   agreement regex {row['agree'][0]:.3f}, letter log-prob "
                    f"{row['agree'][1]:.3f}"
                )
            print(f"    bf16 / float32 (prefix tree): {table['bf16_over_float32']:.2f}")


if __name__ == "__main__":
    main()
