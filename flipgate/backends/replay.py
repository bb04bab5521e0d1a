"""Replay backend: serves recorded outputs from a JSONL file keyed by trial identity.

Used to re-analyse released audit outputs and in the project's tests. Each line holds
``dataset, item_id, facet, condition, sample`` and the output fields (``text``,
``label_logprobs``, token counts), as written by :func:`flipgate.store.export_replay`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flipgate import FlipgateError
from flipgate.backends.base import Output, Request
from flipgate.hashing import sha256_file

KEY_FIELDS = ("dataset", "item_id", "facet", "condition", "sample")


class ReplayBackend:
    """Looks each request's trial identity up in a recorded JSONL file."""

    def __init__(self, cfg: dict[str, Any]):
        self.model_id = cfg["id"]
        path = Path((cfg.get("source") or {}).get("path", ""))
        if not path.is_file():
            raise FlipgateError(
                f"model {self.model_id!r}: replay source.path {str(path)!r} is not a file"
            )
        self.path = path
        self.records: dict[tuple, Output] = {}
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    key = tuple(rec[k] for k in KEY_FIELDS)
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise FlipgateError(
                        f"{path} line {lineno}: not a replay record with fields "
                        f"{', '.join(KEY_FIELDS)} ({exc})"
                    ) from exc
                self.records[key] = Output.from_dict(rec)
        digest = sha256_file(path)
        self.fingerprint = {
            "backend": "replay",
            "source": str(path),
            "weights_sha256": f"replay:{digest}",
            "dtype": None,
            "quantization": None,
            "tokenizer_sha256": None,
            "chat_template_sha256": None,
        }
        self.settings = {"backend": "replay", "file_sha256": digest}
        self.supports_images = True  # it serves whatever was recorded
        self.batch_size = 8
        self.call_stats = None

    def complete(self, requests: list[Request]) -> list[Output]:
        outputs = []
        for r in requests:
            if r.key not in self.records:
                raise FlipgateError(
                    f"{self.path}: no recorded output for trial {dict(zip(KEY_FIELDS, r.key))}"
                )
            outputs.append(self.records[r.key])
        return outputs
