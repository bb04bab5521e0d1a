"""Trials/s of batched letter-logprob scoring vs a naive one-prompt-at-a-time generate loop.

Same model, same prompts, same run. Default model: the embedded SmolLM2-135M-Instruct.
    python benchmarks/readout_throughput.py [--n 48] [--batch-size 16]
        [--models models.yaml --model ID]
"""

from __future__ import annotations

import time

from common import model_config, option_order_requests, parser

from flipgate.backends.hf import HFBackend
from flipgate.readouts import read_label


def timed(backend: HFBackend, requests) -> tuple[float, list]:
    backend.complete(requests[:2])  # warm-up
    t0 = time.perf_counter()
    outs = backend.complete(requests)
    return len(requests) / (time.perf_counter() - t0), outs


def main() -> None:
    ap = parser(__doc__, 48)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()

    cfg = model_config(args)
    requests = option_order_requests(args.dataset, args.n)

    scoring = HFBackend({**cfg, "readouts": ["letter_logprob"], "batch_size": args.batch_size})
    naive = HFBackend({**cfg, "readouts": ["regex"], "batch_size": 1})
    batched_gen = HFBackend(
        {**cfg, "readouts": ["regex", "letter_logprob"], "batch_size": args.batch_size}
    )
    arms = {
        "batched letter-logprob (forward pass, bs=%d)" % args.batch_size: timed(scoring, requests),
        "naive generate loop (bs=1)": timed(naive, requests),
        "batched generate + logprobs (bs=%d)" % args.batch_size: timed(batched_gen, requests),
    }
    base = arms["naive generate loop (bs=1)"][0]
    print(
        f"model {args.model}, {len(requests)} trials per arm, "
        f"prompts from {args.dataset} option_order"
    )
    for name, (rate, _) in arms.items():
        print(f"  {name:48s} {rate:7.2f} trials/s   x{rate / base:5.2f} vs naive")
    letters = [
        read_label("letter_logprob", o, r.labels, r.answer_prefix)
        for o, r in zip(arms[next(iter(arms))][1], requests)
    ]
    texts = [
        read_label("regex", o, r.labels, r.answer_prefix)
        for o, r in zip(arms["naive generate loop (bs=1)"][1], requests)
    ]
    agree = sum(a == b for a, b in zip(letters, texts)) / len(requests)
    print(
        f"  letter-logprob vs generated-text label agreement: {agree:.3f}; "
        f"text parse rate {sum(t is not None for t in texts) / len(texts):.3f}"
    )


if __name__ == "__main__":
    main()
