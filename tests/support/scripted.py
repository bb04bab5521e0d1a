"""The counting fake backend that most tests share (a few tests define a backend of their own)."""

from __future__ import annotations

from flipgate.backends.base import Output, Request


class ScriptedBackend:
    """Test double: answers by a rule on the rendered request and counts calls."""

    def __init__(self, model_id="scripted", rule=None):
        self.model_id = model_id
        self.fingerprint = {"backend": "scripted", "weights_sha256": "scripted", "source": None}
        self.settings = {"backend": "scripted", "model": model_id}
        self.calls = 0
        self.batch_size = 4
        self.supports_images = False
        self.call_stats = None  # no API calls
        # default rule: always pick the first displayed label (a pure position bias)
        self.rule = rule or (lambda req: req.labels[0])

    def complete(self, requests: list[Request]) -> list[Output]:
        self.calls += len(requests)
        outs = []
        for r in requests:
            label = self.rule(r)
            text = "" if label is None else f" {label}"
            logprobs = {lab: (-0.1 if lab == label else -3.0) for lab in r.labels}
            outs.append(Output(text, logprobs, 10, 2))
        return outs
