"""Tests that share a module-scoped fixture run on one xdist worker: a hook that
``tests/conftest.py`` imports, so pytest calls it there."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Put every test that uses a module-scoped fixture (an audit, a fit, a server) in its module's
    xdist group: ``make test`` distributes by ``loadgroup``, and spread over workers each worker
    would build the fixture again. First among the hooks: an xdist worker's own hook reads the
    group markers to name the group in each node id, and does not see a marker added after it."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info else ()
        if any(d[-1].scope == "module" for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
