"""What the benchmark scripts share: the model options and option-order prompts from a dataset."""

from __future__ import annotations

import argparse

from flipgate.backends.base import Request
from flipgate.config import load_models
from flipgate.facets import get_facet
from flipgate.grammar import orderings
from flipgate.items import DatasetSpec, load_items


def parser(doc: str, n: int) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--models", default="models.yaml")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--dataset", default="mmlu")
    ap.add_argument("--n", type=int, default=n, help="trials per arm")
    ap.add_argument("--cache-dir", default=".flipgate_cache")
    return ap


def model_config(args) -> dict:
    return {**load_models(args.models).models[args.model], "_cache_dir": args.cache_dir}


def option_order_requests(dataset: str, n: int) -> list[Request]:
    """``n`` option-order prompts: K=6 manifest orderings of the first seed-42 items."""
    facet = get_facet("option_order")
    items = load_items(DatasetSpec(dataset), n // 6 + 1, keep=facet.keep)
    return [facet.render(it, p) for it in items for p in orderings(it.item_id, it.n_options, 6)][:n]
