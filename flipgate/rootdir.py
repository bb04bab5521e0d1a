"""A flipgate option's value given apart (``--models /other/models.yaml``) must not move pytest's
rootdir.

pytest finds its rootdir and ini file before it loads plugins, so it does not yet know that
``--models`` takes a value: it reads ``/other/models.yaml`` as a test path, and a path outside the
project moves the rootdir there; the project's pytest settings (``--pyargs flipgate_suites``) are
then never read and the run collects nothing. ``--models=PATH`` is one token and is never taken
for a test path. pytest offers no hook before that choice, so :func:`check` (run from
``pytest_load_initial_conftests``, once flipgate's options are known) finds the rootdir pytest
would have chosen without those values and, where it differs, stops with one line saying to
write ``OPTION=PATH``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest


def _valued_options(parser: Any) -> set[str]:
    """The long names of flipgate's options that take a value (``--models``, ``--budget``...)."""
    group = parser.getgroup("flipgate")
    return {
        name
        for option in group.options
        if option.attrs().get("action") not in ("store_true", "store_false", "count")
        for name in option.names()
        if name.startswith("--")
    }


def _rootdir_without(config: pytest.Config, args: list[str]) -> Path | None:
    """The rootdir pytest chooses for test paths ``args`` (its own rule); None when this pytest's
    rule cannot be called."""
    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:  # pragma: no cover - a pytest without it
        return None
    known = config.known_args_namespace
    given = {
        "inifile": known.inifilename,
        "override_ini": known.override_ini,
        "args": args,
        "rootdir_cmd_arg": known.rootdir or None,
        "invocation_dir": config.invocation_params.dir,
    }
    wanted = inspect.signature(determine_setup).parameters
    return determine_setup(**{k: v for k, v in given.items() if k in wanted})[0]


def check(config: pytest.Config, parser: Any) -> None:
    """Stop with one line when a flipgate option's value, given as a separate argument, made
    pytest choose another rootdir than it would have without it."""
    args = list(config.invocation_params.args)
    ours = _valued_options(parser)
    apart = [(opt, value) for opt, value in zip(args, args[1:]) if opt in ours]
    if not apart or not any(Path(value).exists() for _, value in apart):
        return
    expected = _rootdir_without(config, list(config.known_args_namespace.file_or_dir))
    if expected is None or expected == config.rootpath:
        return
    opt, value = next((o, v) for o, v in apart if Path(v).exists())
    raise pytest.UsageError(
        f"flipgate: {opt} {value}: pytest took the value for a test path and moved its rootdir "
        f"to {config.rootpath} (the project's is {expected}), so the audit would collect "
        f"nothing; write {opt}={value}"
    )
