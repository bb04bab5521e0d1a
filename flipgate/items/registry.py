"""Dataset names usable in models.yaml and deterministic seed-42 sampling (Facet-Probe §3)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from flipgate import FlipgateError
from flipgate.items import (
    alignment,
    bigbench,
    hub,
    hub_mixed,
    judge_sets,
    offline,
    shapes,
    synthetic,
)
from flipgate.items.item import Item

# name -> loader(dataset_name, **options) -> all items
DATASETS: dict[str, Callable[..., list[Item]]] = {
    "mmlu": offline.load_mmlu,
    "mmlu_philosophy": functools.partial(offline.load_mmlu, subjects=["philosophy"]),
    "basic_arithmetic": offline.load_basic_arithmetic,
    "arc_challenge": functools.partial(offline.load_arc, "ARC-Challenge"),
    "arc_easy": functools.partial(offline.load_arc, "ARC-Easy"),
    "commonsense_qa": offline.load_commonsense_qa_offline,
    "openbookqa": offline.load_openbookqa,
    "social_iqa": offline.load_social_iqa,
    "mmlu_pro": hub.load_mmlu_pro,
    "commonsense_qa_hub": hub.load_commonsense_qa_hub,
    "hotpotqa": hub.load_hotpotqa,
    "musique": hub.load_musique,
    "multihop_rag": hub.load_multihop_rag,
    "synthetic_multihop": functools.partial(synthetic.generate, units="chunks"),
    "synthetic_rag": functools.partial(synthetic.generate, units="documents"),
    "synthetic_shapes": shapes.generate,
    "synthetic_mixed": shapes.generate_mixed,
    "basic_arithmetic_few_shot": offline.load_basic_arithmetic_few_shot,
    "synthetic_dialog": synthetic.generate_dialogs,
    "synthetic_tools": synthetic.generate_tool_queries,
    "mathvision": hub.load_mathvision,
    "medxpertqa": hub.load_medxpertqa,
    "mantis_eval": hub.load_mantis_eval,
    "medframeqa": hub.load_medframeqa,
    "mramg_recipe": hub_mixed.load_mramg_recipe,
    "mmdocrag": hub_mixed.load_mmdocrag,
    "multimodalqa": hub_mixed.load_multimodalqa,
    "truthfulqa_mc": bigbench.load_truthfulqa_mc,
    "bbq_lite": bigbench.load_bbq_lite,
    "toxigen": alignment.load_toxigen,
    "crows_pairs": alignment.load_crows_pairs,
    "xstest": alignment.load_xstest,
    "rewardbench2_factuality": judge_sets.load_rewardbench2,
    "judgebench": judge_sets.load_judgebench,
    "arc_challenge_answers": functools.partial(judge_sets.load_answer_sets, source="arc_challenge"),
    "arc_easy_answers": functools.partial(judge_sets.load_answer_sets, source="arc_easy"),
    "mmlu_answers": functools.partial(judge_sets.load_answer_sets, source="mmlu"),
}


def loader_options(name: str) -> list[str]:
    """The options (models.yaml keys besides ``name`` and ``n``) the loader of ``name`` takes."""
    params = list(inspect.signature(DATASETS[name]).parameters.values())[
        1:
    ]  # the first is the dataset name
    return [
        p.name
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "units"
    ]


def check_options(name: str, options: dict, where: str) -> None:
    """Refuse options the loader does not take (e.g. ``data_files`` on a bundled dataset), which
    would otherwise be ignored or fail deep inside."""
    known = loader_options(name)
    for key in options:
        if key not in known:
            raise FlipgateError(
                f"{where}: field {key!r}: dataset {name!r} takes no such option (value: "
                f"{options[key]!r}); it takes: {', '.join(known) or 'none (a bundled copy)'}"
            )


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset as declared in models.yaml: registry ``name``, loader options and an optional
    per-dataset item count ``n`` (overrides ``audit.items_per_dataset``)."""

    name: str
    options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    n: int | None = None

    @classmethod
    def parse(cls, value: Any, where: str) -> "DatasetSpec":
        if isinstance(value, str):
            name, options = value, {}
        elif isinstance(value, dict) and isinstance(value.get("name"), str):
            name, options = (
                value["name"],
                {k: v for k, v in value.items() if k not in ("name", "n")},
            )
        else:
            raise FlipgateError(
                f"{where}: a dataset is a name or a mapping with 'name', got {value!r}"
            )
        if name not in DATASETS:
            raise FlipgateError(
                f"{where}: unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}"
            )
        n = value.get("n") if isinstance(value, dict) else None
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise FlipgateError(f"{where}: field 'n' must be a positive integer (value: {n!r})")
        check_options(name, options, where)
        hashable = {
            k: tuple(v) if isinstance(v, list) else v for k, v in options.items()
        }  # cache key
        return cls(name, tuple(sorted(hashable.items())), n)

    def describe(self) -> str:
        """Its source and cap as declared, e.g. ``data_files: '/a.jsonl', n: 40`` (whole: a
        message names the file)."""
        parts = [f"{k}: {list(v) if isinstance(v, tuple) else v!r}" for k, v in self.options]
        parts += [f"n: {self.n}"] if self.n is not None else []
        return ", ".join(parts) or "its default source"


def refuse_repeated(lists: Sequence[tuple[str, Sequence[DatasetSpec]]], where: str) -> None:
    """Refuse a dataset name that ``lists`` ((field, specs) pairs, e.g.
    ``("audit.facets.option_order.datasets", specs)``) declare with two sources or caps, or twice
    in one list. Cells, caches and cards know a dataset by its name alone, so the second
    declaration would never be read (issue #60). One declaration in two lists (a dataset on two
    facets) is one dataset. ``where``: the file."""
    first: dict[str, tuple[str, DatasetSpec]] = {}
    for list_field, specs in lists:
        here: dict[str, int] = {}
        for j, spec in enumerate(specs):
            at = f"{list_field}[{j}]"
            earlier_at, earlier = first.setdefault(spec.name, (at, spec))
            if earlier != spec:
                raise FlipgateError(
                    f"{where}: field {at}: dataset {spec.name!r} is declared again with another "
                    f"source or n ({earlier.describe()} at {earlier_at}; {spec.describe()} "
                    f"here); a dataset is known by its name alone, so one of the two would never "
                    f"be read: declare one source per name (data_files takes a list of files read "
                    f"as one)"
                )
            if spec.name in here:
                raise FlipgateError(
                    f"{where}: field {at}: dataset {spec.name!r} is listed twice (also at "
                    f"{list_field}[{here[spec.name]}]); list it once"
                )
            here[spec.name] = j


@functools.lru_cache(maxsize=16)
def _all_items(name: str, options: tuple[tuple[str, Any], ...]) -> tuple[Item, ...]:
    items = DATASETS[name](name, **dict(options))
    if not items:
        raise FlipgateError(
            f"dataset {name!r} ({DatasetSpec(name, options).describe()}) loaded no rows"
        )
    return tuple(items)


def load_items(
    spec: DatasetSpec, n: int | None, seed: int = 42, keep: Callable[[Item], bool] | None = None
) -> list[Item]:
    """Seed-42 uniform shuffle of the whole dataset, facet filter ``keep``, first ``n``."""
    items = _all_items(spec.name, spec.options)
    order = np.random.default_rng(seed).permutation(len(items))
    chosen = [items[i] for i in order if keep is None or keep(items[i])]
    return chosen if n is None else chosen[:n]
