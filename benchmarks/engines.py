"""Real engines side by side (issue #32): trials/s and agreement with the float32 reference per
readout, on the same option-order prompts, in one run.

Arms: flipgate's own engine (the hf backend's prefix tree) in float32, the reference, and in
bf16; llama.cpp's server on the GGUF file as shipped (xllamacpp, through the litellm backend,
the answer prefix prefilled); ``transformers serve`` on the dequantised weights (litellm; it
gives no log-probs and does not continue a prefilled answer, docs/servers.md). Each server is
started by flipgate (flipgate.backends.servers) with ``--threads`` threads, and timed once it
answers; each arm warms up on two prompts first. Agreement is the share of trials whose readout
equals the reference's; a readout an engine cannot give is "not measured", with the reason.

    python benchmarks/engines.py [--n 96] [--threads 2] [--parallel 4]
"""

from __future__ import annotations

from common import labels, model_config, option_order_requests, parser, timed

from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.hf import HFBackend

READOUTS = ("regex", "letter_logprob")


def main() -> None:
    ap = parser(__doc__, 96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=4)
    args = ap.parse_args()
    cfg = {**model_config(args), "readouts": list(READOUTS), "dtype": "float32"}
    server = {"threads": args.threads, "parallel": args.parallel}
    api = {
        **cfg,
        "backend": "litellm",
        "capabilities": {"logprobs": True},
        "retries": {"max_attempts": 1},
    }
    arms = {
        "flipgate prefix tree, float32 (reference)": HFBackend(cfg),
        "flipgate prefix tree, bf16": HFBackend({**cfg, "dtype": "bfloat16"}),
        "llama.cpp server, GGUF as shipped": LiteLLMBackend(
            {**api, "server": {"engine": "llama.cpp", **server}}
        ),
        "transformers serve, float32": LiteLLMBackend(
            {
                **api,
                "readouts": ["regex"],
                "capabilities": {},
                "server": {"engine": "transformers", **server},
            }
        ),
    }
    requests = option_order_requests(args.dataset, args.n)
    print(
        f"model {args.model}, {len(requests)} option-order trials ({args.dataset}), "
        f"{args.threads} threads per engine"
    )
    print("| engine | trials/s | ratio | agreement: regex | agreement: letter log-prob |")
    print("|---|---|---|---|---|")
    reference: dict[str, list] = {}
    base_rate = None
    for name, backend in arms.items():
        rate, outs = timed(backend, requests)
        base_rate = base_rate or rate
        cells = []
        for readout in READOUTS:
            if readout not in backend.readouts:
                cells.append("not measured (the server returns no log-probs)")
                continue
            got = labels(outs, requests, readout)
            if not reference.get(readout):
                reference[readout] = got
            same = sum(a == b for a, b in zip(got, reference[readout]))
            cells.append(f"{same / len(got):.3f} ({same}/{len(got)})")
        print(f"| {name} | {rate:.2f} | {rate / base_rate:.2f} | {' | '.join(cells)} |")
        if isinstance(backend, LiteLLMBackend) and backend.server is not None:
            print(f"|  ↳ {backend.server.engine}, {backend.server.spec.settings()} | | | | |")
            backend.server.stop()


if __name__ == "__main__":
    main()
