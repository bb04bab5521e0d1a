"""Replay backend: serves recorded outputs from a JSONL file keyed by trial identity.

Used to re-analyse released audit outputs and in the project's tests. Each line holds
``dataset, item_id, facet, condition, sample`` and the output fields (``text``,
``label_logprobs``, token counts), as written by :func:`flipgate.store.export_replay`, with the
``prompt_sha256`` of what the model was shown. A recorded answer is served only for that same
prompt: a trial whose prompt differs (the audit's ``k``, seed, grammar or template is not the
recording's, so condition ``c`` is another ordering) is refused with one line naming the file and
the mismatch. A line without ``prompt_sha256`` (a file from an older flipgate) is matched by trial
identity alone. A trial recorded twice is served only when both lines agree: two different
answers for one trial are refused with one line naming the file, both lines and the trial.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flipgate import FlipgateError
from flipgate.backends.base import Output, Request, prompt_sha256
from flipgate.backends.source import public_source
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
        #: per trial identity, the sha256 of the prompt it was recorded for (when the line has it)
        self.prompts: dict[tuple, str] = {}
        #: per trial identity, the line that recorded it
        lines: dict[tuple, int] = {}
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    key = tuple(rec[k] for k in KEY_FIELDS)
                    hash(key)  # a list or mapping as a field is no trial identity
                    output = Output.from_dict(rec)
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise FlipgateError(
                        f"{path} line {lineno}: not a replay record with fields "
                        f"{', '.join(KEY_FIELDS)} ({exc})"
                    ) from exc
                prompt = str(rec["prompt_sha256"]) if rec.get("prompt_sha256") else None
                first = lines.setdefault(key, lineno)
                differ = (
                    _differences((self.records[key], self.prompts.get(key)), (output, prompt))
                    if first != lineno
                    else []
                )
                if differ:
                    raise FlipgateError(
                        f"{path} line {lineno}: trial {dict(zip(KEY_FIELDS, key))} was recorded "
                        f"at line {first} too, with another {', '.join(differ)}; which one to "
                        f"replay is not for the replay to guess: keep one record per trial"
                    )
                self.records[key] = output
                if prompt is not None:
                    self.prompts[key] = prompt
        digest = sha256_file(path)
        self.fingerprint = {
            "backend": "replay",
            "source": public_source(cfg.get("source") or {}),
            "weights_sha256": f"replay:{digest}",
            "dtype": None,
            "quantization": None,
            "tokenizer_sha256": None,
            "chat_template_sha256": None,
        }
        self.settings = {"backend": "replay", "file_sha256": digest}
        self.supports_images = True  # it serves whatever was recorded
        #: each trial's own recorded answer is served (whether the recording measured a
        #: control's replicates is the recording's: a replay of a greedy hf run replays copies)
        self.measures_replicates = True
        self.batch_size = 8
        self.call_stats = None

    def complete(self, requests: list[Request]) -> list[Output]:
        outputs = []
        for r in requests:
            if r.key not in self.records:
                raise FlipgateError(
                    f"{self.path}: no recorded output for trial {dict(zip(KEY_FIELDS, r.key))}"
                )
            recorded = self.prompts.get(r.key)
            if recorded is not None and recorded != (shown := prompt_sha256(r)):
                raise FlipgateError(
                    f"{self.path}: trial {dict(zip(KEY_FIELDS, r.key))} was recorded for another "
                    f"prompt (prompt_sha256 {recorded[:8]}, this audit's {shown[:8]}): the audit's "
                    f"k, seed, grammar or template differ from the recording's"
                )
            outputs.append(self.records[r.key])
        return outputs


def _differences(a: tuple[Output, str | None], b: tuple[Output, str | None]) -> list[str]:
    """The fields in which two records of one trial differ (output fields, ``prompt_sha256``),
    compared as JSON so that two NaN log-probs are the same value."""
    left = {**a[0].to_dict(), "prompt_sha256": a[1]}
    right = {**b[0].to_dict(), "prompt_sha256": b[1]}
    return [
        k
        for k in dict.fromkeys([*left, *right])
        if json.dumps(left.get(k), sort_keys=True) != json.dumps(right.get(k), sort_keys=True)
    ]
