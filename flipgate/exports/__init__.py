"""Results in the formats others read (``python -m flipgate export``, docs/exports.md): a model's
GRID cards as Hugging Face ``.eval_results/*.yaml`` files (:mod:`flipgate.exports.eval_results`)
and as Every Eval Ever evaluation logs (:mod:`flipgate.exports.every_eval_ever`), each written
through its format's own package."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from flipgate import FlipgateError


def require(
    module: str, package: str, install: str, who: str, names: tuple[str, ...] = ()
) -> ModuleType:
    """``module`` imported (with ``names`` in it), or a FlipgateError (one line) naming
    ``package`` and how to install it into this interpreter (``install``: pip's arguments)."""
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        why = " ".join(str(exc).split())
    else:
        missing = [name for name in names if not hasattr(imported, name)]
        if not missing:
            return imported
        version = getattr(imported, "__version__", "?")
        why = f"{module} {version} has no {', '.join(missing)}"
    raise FlipgateError(
        f"{who} needs the package {package} ({why}); install it: "
        f"{sys.executable} -m pip install {install}"
    )
