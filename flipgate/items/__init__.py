"""Canonical item records and dataset loaders (Facet-Probe App. J: one record per item)."""

from flipgate.items.item import Item, Passage, require
from flipgate.items.registry import DATASETS, DatasetSpec, load_items

__all__ = ["Item", "Passage", "require", "DATASETS", "DatasetSpec", "load_items"]
