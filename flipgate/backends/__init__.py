"""Backends behind one small interface (see :mod:`flipgate.backends.base`)."""

from __future__ import annotations

from flipgate import FlipgateError
from flipgate.backends.base import Backend, Output, Request


def create_backend(model_cfg: dict) -> Backend:
    """Instantiate the backend a models.yaml entry names."""
    kind = model_cfg["backend"]
    if kind == "hf":
        from flipgate.backends.hf import HFBackend

        return HFBackend(model_cfg)
    if kind == "litellm":
        from flipgate.backends.api import LiteLLMBackend

        return LiteLLMBackend(model_cfg)
    if kind == "replay":
        from flipgate.backends.replay import ReplayBackend

        return ReplayBackend(model_cfg)
    raise FlipgateError(
        f"model {model_cfg.get('id')!r}: unknown backend {kind!r} (known: hf, litellm, replay)"
    )


__all__ = ["Backend", "Output", "Request", "create_backend"]
