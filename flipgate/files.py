"""Atomic file writes: a temporary file beside the target, then a rename, so a reader never sees a
half-written card, baseline or model card; and flipgate's per-user cache folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

#: overrides :func:`user_cache_dir`
CACHE_HOME_ENV = "FLIPGATE_CACHE_HOME"


def user_cache_dir() -> Path:
    """flipgate's per-user cache, shared by every project of the user: file-hash memos, and where
    a local copy of the optional bigbench sdist is looked for. ``$FLIPGATE_CACHE_HOME``, else the
    platform's user cache folder (``~/.cache/flipgate`` on Linux, ``~/Library/Caches/flipgate``
    on macOS). A project's own outputs and its response cache stay in the project
    (``--cache-dir``)."""
    if os.environ.get(CACHE_HOME_ENV):
        return Path(os.environ[CACHE_HOME_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("flipgate", appauthor=False))


def temp_beside(target: Path) -> Path:
    """An empty temporary file in ``target``'s directory, with the mode a new file would get."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return Path(tmp)


def replace_with(target: Path | str, fill: Callable[[Path], object]) -> None:
    """Write ``target`` atomically: ``fill(tmp)`` writes a temporary file beside it, which then
    replaces it; on any failure the temporary file is removed and ``target`` is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(target)
    try:
        fill(tmp)
        os.replace(tmp, target)
    except BaseException:
        for leftover in (tmp, Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)
        raise


def atomic_write(target: Path | str, text: str) -> None:
    replace_with(target, lambda tmp: tmp.write_text(text, encoding="utf-8", newline=""))


def atomic_copy(source: Path | str, target: Path | str) -> None:
    replace_with(target, lambda tmp: shutil.copyfile(source, tmp))
