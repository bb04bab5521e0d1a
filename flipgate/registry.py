"""The suites the core iterates: flipgate's own, then those other packages register through the
``flipgate.suites`` entry-point group (docs/architecture.md).

Entries are ``"module:attribute"`` strings imported on first use, so reading models.yaml does not
import every suite's runner. An entry point's object must be a :class:`flipgate.suite.api.Suite`
that defines the required members (:data:`flipgate.suite.api.REQUIRED`) and bring a name no
other suite has; a broken one is a one-line error naming its distribution and entry point.
"""

from __future__ import annotations

import importlib
import re
from importlib.metadata import entry_points

from flipgate import FlipgateError, config
from flipgate.suite.api import REQUIRED, Suite

#: entry-point group through which an installed package adds a suite
ENTRY_POINT_GROUP = "flipgate.suites"

#: flipgate's suites, in the order the core visits them (parametrisation, guard, cards)
BUILTIN: dict[str, str] = {
    "order": "flipgate.order.suite:SUITE",
    "envelope": "flipgate.envelope.suite:SUITE",
    "odi": "flipgate.odi.suite:SUITE",
    "decomposition": "flipgate.decomposition.suite:SUITE",  # formerly readouts
    "judges": "flipgate.judges.suite:SUITE",
    "continuity": "flipgate.continuity.suite:SUITE",
    "regression": "flipgate.regression.suite:SUITE",
}

NAME = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")

_loaded: dict[str, Suite] | None = None


def _check(suite: object, where: str) -> Suite:
    if not isinstance(suite, Suite):
        raise FlipgateError(
            f"{where}: not a flipgate suite: {type(suite).__name__} is not a subclass of "
            "flipgate.suite.api.Suite"
        )
    own = type(suite)
    defined = {
        "name": hasattr(suite, "name"),
        "cases": own.cases is not Suite.cases,
        "measure": own.measure is not Suite.measure or own.cell is not Suite.cell,
    }
    missing = [member for member in REQUIRED if not defined[member]]
    if missing:
        raise FlipgateError(
            f"{where}: not a flipgate suite: {own.__name__} does not define "
            f"{', '.join(missing)} (flipgate.suite.api.REQUIRED)"
        )
    for field, value in [("name", suite.name)] + [("former_names", n) for n in suite.former_names]:
        if not isinstance(value, str) or not NAME.match(value):
            raise FlipgateError(
                f"{where}: field {field}: a suite name is 1-32 of a-z, 0-9 and _, starting with a "
                f"letter (value: {value!r})"
            )
    return suite


def _import(target: str, where: str) -> object:
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise FlipgateError(f"{where}: cannot load {target!r}: {exc}") from None


def _load() -> dict[str, Suite]:
    found: dict[str, Suite] = {}
    for name, target in BUILTIN.items():
        found[name] = _check(_import(target, f"flipgate suite {name!r}"), target)
        config.declare_suite(found[name], external=False)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "?"
        where = f"entry point {ep.name!r} of {dist} (group {ENTRY_POINT_GROUP})"
        try:
            obj = ep.load()
        except Exception as exc:  # a third party's import error, whatever its type
            raise FlipgateError(f"{where}: cannot load {ep.value!r}: {exc}") from None
        suite = _check(obj, where)
        for field, name in [("name", suite.name)] + [
            ("former_names", n) for n in suite.former_names
        ]:
            owner = next((s for s in found.values() if name in (s.name, *s.former_names)), None)
            if owner is not None:
                raise FlipgateError(
                    f"{where}: field {field}: suite {name!r} is already registered (by "
                    f"{BUILTIN.get(owner.name, 'another entry point')}"
                    + (")" if owner.name == name else f", as a former name of {owner.name!r})")
                )
        found[suite.name] = suite
        config.declare_suite(suite, external=True)  # models.yaml and thresholds accept its parts
    return found


def suites() -> list[Suite]:
    """Every registered suite, flipgate's first (loaded once per process)."""
    global _loaded
    if _loaded is None:
        _loaded = _load()
    return list(_loaded.values())


def names() -> list[str]:
    return [s.name for s in suites()]


def get(name: str) -> Suite:
    """The suite called ``name`` (or once called so: :attr:`Suite.former_names`); a one-line
    error listing the known ones otherwise."""
    for suite in suites():
        if name in (suite.name, *suite.former_names):
            return suite
    raise FlipgateError(f"unknown suite {name!r}; known: {', '.join(names())}")


def external() -> list[Suite]:
    """The suites other packages registered (their settings, thresholds and card sections go
    through the generic paths of config, thresholds and cards)."""
    return [s for s in suites() if s.name not in BUILTIN]


def reset() -> None:
    """Forget the loaded suites (a test that installs an entry point loads them again)."""
    global _loaded
    _loaded = None
    config.SUITES.clear()
    config.EXTERNAL_SUITES.clear()


config.set_suite_loader(suites)  # reading models.yaml through flipgate.config loads the suites
