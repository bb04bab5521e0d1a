"""Trials/s of the local engine's batching options vs a naive one-prompt-at-a-time generate loop,
and whether their answers equal the naive loop's (issue #14, target 3).

Same model, same prompts, same run: facet prompts (K=6 option orderings per item) and control
prompts (the canonical ordering K times). Arms, all float32 unless named: the naive loop (batch
1, every prompt computed whole), batched (prompts computed whole, sorted by length), the engine's
prefix tree (docs/engine.md), and that in bfloat16. Default model: the embedded
SmolLM2-135M-Instruct.
    python benchmarks/engine_throughput.py [--n 96] [--batch-size 64]
        [--models models.yaml --model ID]
"""

from __future__ import annotations

from common import labels, model_config, option_order_requests, parser, timed

from flipgate.backends.base import Request
from flipgate.backends.hf import HFBackend

READOUTS = ("regex", "letter_logprob")


def control_requests(facet_requests: list[Request], k: int = 6) -> list[Request]:
    """The same-ordering control's prompts: each item's first ordering, K times."""
    return [r for r in facet_requests[::k] for _ in range(k)]


def main() -> None:
    ap = parser(__doc__, 96)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    cfg = {**model_config(args), "readouts": list(READOUTS), "dtype": "float32"}
    arms = {
        "naive generate loop (bs=1)": HFBackend({**cfg, "batch_size": 1, "prefix_sharing": False}),
        f"batched (bs={args.batch_size})": HFBackend(
            {**cfg, "batch_size": args.batch_size, "prefix_sharing": False}
        ),
        f"prefix tree (bs={args.batch_size})": HFBackend({**cfg, "batch_size": args.batch_size}),
        f"prefix tree, bf16 (bs={args.batch_size})": HFBackend(
            {**cfg, "batch_size": args.batch_size, "dtype": "bfloat16"}
        ),
    }
    facet = option_order_requests(args.dataset, args.n)
    prompts = {"facet": facet, "control": control_requests(facet)}
    print(f"model {args.model}, {args.n} trials per arm and prompt set, {args.dataset}")
    print("  agreement = share of trials whose readout equals the naive loop's")
    for kind, requests in prompts.items():
        results = {name: timed(backend, requests) for name, backend in arms.items()}
        base_rate, base_outs = results["naive generate loop (bs=1)"]
        reference = {r: labels(base_outs, requests, r) for r in READOUTS}
        print(f"  {kind} prompts:")
        for name, (rate, outs) in results.items():
            agree = [
                sum(a == b for a, b in zip(labels(outs, requests, r), reference[r])) / len(requests)
                for r in READOUTS
            ]
            print(
                f"    {name:44s} {rate:6.2f} trials/s  x{rate / base_rate:5.2f} vs naive"
                f"   agreement regex {agree[0]:.3f}, letter log-prob {agree[1]:.3f}"
            )


if __name__ == "__main__":
    main()
