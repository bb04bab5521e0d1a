"""Key/value caches for the local engine that write into preallocated buffers.

transformers' ``DynamicCache`` appends each step's keys and values with ``torch.cat``, copying the
whole cache every step; with a decode batch of 64 prompts of ~200 tokens that copying took a third
of the engine's time (profile in docs/engine.md). :func:`slot_cache` returns a ``DynamicCache``
whose layers hold buffers sized for the prompts and the answer, filled in place.
"""

from __future__ import annotations

from typing import Any

from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class SlotLayer(DynamicLayer):
    """One layer's keys and values in buffers of ``capacity`` positions; ``keys``/``values`` are
    views of the filled part. Grows (by copying) only if an update overruns the capacity."""

    def __init__(self, keys, values, length: int, is_sliding: bool):
        super().__init__()
        self.buffers = (keys, values)
        self.length = length
        self.is_sliding = is_sliding  # the model's layer kind, for the attention masks
        self.is_initialized = True
        self.device = keys.device
        self._views()

    def _views(self) -> None:
        self.keys = self.buffers[0][:, :, : self.length]
        self.values = self.buffers[1][:, :, : self.length]

    def update(self, key_states, value_states, *args: Any, **kwargs: Any):
        import torch

        n = key_states.shape[-2]
        keys, values = self.buffers
        if self.length + n > keys.shape[2]:
            keys = torch.cat([keys, keys.new_zeros((*keys.shape[:2], n, keys.shape[3]))], dim=2)
            values = torch.cat(
                [values, values.new_zeros((*values.shape[:2], n, values.shape[3]))], 2
            )
            self.buffers = (keys, values)
        keys[:, :, self.length : self.length + n] = key_states
        values[:, :, self.length : self.length + n] = value_states
        self.length += n
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length


def slot_cache(model_config: Any, layers: list) -> DynamicCache:
    """A cache over ``layers`` (per model layer: key buffer, value buffer, filled length) for a
    model with ``model_config``."""
    cache = DynamicCache(config=model_config)
    kinds = [getattr(layer, "is_sliding", False) for layer in cache.layers]
    kinds += [False] * (len(layers) - len(kinds))
    cache.layers = [
        SlotLayer(keys, values, length, sliding)
        for (keys, values, length), sliding in zip(layers, kinds)
    ]
    return cache
