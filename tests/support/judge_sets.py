"""JudgeBench-shaped rows written as JSONL, for the judge-set tests."""

from __future__ import annotations

import json


def jb_rows() -> list[dict]:
    sources = ["mmlu-pro-history", "livebench-math", "livecodebench", "mmlu-pro-computer science"]
    return [
        {
            "pair_id": f"pair-{i:03d}",
            "original_id": 10640 + i if sources[i % 4].startswith("mmlu") else None,
            "source": sources[i % 4],
            "question": f"Problem {i}?",
            "response_model": "gpt-4o-2024-05-13",
            "response_A": f"response A of {i}",
            "response_B": f"response B of {i}",
            "label": "A>B" if i % 3 else "B>A",
        }
        for i in range(8)
    ]


def write_jsonl(rows: list[dict], path) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)
