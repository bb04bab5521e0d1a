"""The order suite: the ordering facets and their same-ordering controls (docs/suites/order.md)."""
