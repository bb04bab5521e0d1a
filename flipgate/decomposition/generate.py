"""``python -m flipgate generate-paraphrases``: fill the paraphrase store through any backend of
models.yaml. Each new rewrite is written *unchecked* (checks null), so the paraphrase gate stops a
run that would use it until someone has set its meaning and difficulty checks to pass or fail
(docs/definitions.md §8). An output that yields no rewrite is counted, never guessed."""

from __future__ import annotations

from pathlib import Path

from flipgate import FlipgateError
from flipgate.backends.base import Request
from flipgate.calls import Auditor, Paths
from flipgate.cli import OK, Parser, run_command
from flipgate.config import load_models
from flipgate.decomposition.names import DECOMPOSITION_CELL
from flipgate.decomposition.run import decomposable
from flipgate.hashing import sha256_json
from flipgate.items import load_items
from flipgate.paraphrases import CHECKS, Paraphrase, ParaphraseStore, append

INSTRUCTION = (
    "Rewrite the question below so that it asks exactly the same thing in different words. Keep "
    "every name, number and technical term, and keep an unfinished sentence unfinished. Output "
    "only the rewritten question.\n\nQuestion: {question}"
)
PREFIX = "Rewritten question:"


def rewrite_request(question: str, key: tuple = ()) -> Request:
    return Request(
        (("user", INSTRUCTION.format(question=question.strip())),), PREFIX, (), 0, key, 96
    )


def parse_rewrite(text: str, question: str) -> str | None:
    """The first non-empty line of the output, unless it is empty or the question itself."""
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    line = line.removeprefix(PREFIX).strip().strip('"').strip()
    return line if line and line != question.strip() else None


def generate(
    models: str, model_id: str, dataset: str, n: int, out: Path, cache_dir: str
) -> tuple[int, int]:
    """Rewrite the first ``n`` items of ``dataset`` (audit.decomposition) with ``model_id``;
    append them to ``out`` unchecked; return (written, outputs that gave no rewrite)."""
    cfg = load_models(models)
    plan = cfg.plans.get(DECOMPOSITION_CELL)
    if plan is None:
        raise FlipgateError(f"{cfg.path}: no audit.decomposition (its datasets and store)")
    items = load_items(plan.dataset(dataset), n, cfg.seed, keep=decomposable)
    cache = Path(cache_dir)
    # the audit's model calls (batching, API concurrency and retries, the response cache); the
    # rewrites are no trials, so the run store is an in-memory one
    auditor = Auditor(
        cfg,
        "generate-paraphrases",
        Paths(Path(":memory:"), cache / "responses.sqlite", cache / "manifests", cache),
        progress=False,
    )
    store = ParaphraseStore.load(plan.paraphrases)
    generator = f"model:{model_id}@{sha256_json(auditor.backend(model_id).fingerprint)[:12]}"
    requests = [rewrite_request(it.question, (dataset, it.item_id)) for it in items]
    outputs, _ = auditor.outputs(model_id, requests, use_cache=True, label="paraphrases")
    written, failed = [], 0
    for it, output in zip(items, outputs):
        text = parse_rewrite(output.text, it.question)
        if text is None:
            failed += 1
            continue
        taken = {p.paraphrase_id for p in store.all(it.item_id)}
        number = next(k for k in range(1, len(taken) + 2) if f"g{k}" not in taken)
        written.append(
            Paraphrase(it.item_id, f"g{number}", text, generator, {c: None for c in CHECKS})
        )
    append(out, written)
    return len(written), failed


def _generate(argv: list[str]) -> int:
    p = Parser(
        prog="python -m flipgate generate-paraphrases",
        description="Rewrite the decomposition items' questions with a model; the rewrites are "
        "stored unchecked, and the paraphrase gate stops runs that would use them until checked.",
    )
    p.add_argument("--model", required=True, help="a model id of models.yaml")
    p.add_argument("--dataset", required=True, help="a dataset of audit.decomposition")
    p.add_argument("--n", type=int, default=12, help="items to rewrite (default 12)")
    p.add_argument("--out", help="store file (default: <store>/<dataset>.generated.jsonl)")
    p.add_argument("--models", default="models.yaml")
    p.add_argument("--cache-dir", default=".flipgate_cache")
    args = p.parse_args(argv)
    plan = load_models(args.models).plans.get(DECOMPOSITION_CELL)
    folder = plan.paraphrases if plan else Path("fixtures/paraphrases")
    out = Path(args.out) if args.out else folder / f"{args.dataset}.generated.jsonl"
    written, failed = generate(args.models, args.model, args.dataset, args.n, out, args.cache_dir)
    print(
        f"flipgate generate-paraphrases: {written} rewrite(s) appended to {out}, unchecked; "
        f"{failed} output(s) gave none. Set each one's checks (meaning, difficulty) to pass or "
        "fail before a run uses the paraphrase axis."
    )
    return OK


def generate_main(argv: list[str] | None = None) -> int:
    return run_command(_generate, argv)
