"""Atomic file writes: a temporary file beside the target, then a rename, so a reader never sees a
half-written card, baseline or model card; and flipgate's per-user cache folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from flipgate import FlipgateError, not_utf8

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


def user_file(path: Path | str, within: Path | str, name: str) -> Path:
    """The file to write for ``path``, a file of the user's that a command updates (a model card, a
    ``.gitignore``, a pytest configuration): ``path`` itself, or where its links lead when they
    stay inside ``within`` (the project). An atomic write (:func:`replace_with`) to the returned
    path keeps a link a link and never writes through one out of the project: a link that leads
    outside ``within``, a dangling link, or anything but a regular file is refused with one
    :class:`~flipgate.FlipgateError` line (``name``: how the message names ``path``) before
    anything is written."""
    path = Path(path)
    real = path.resolve()
    root = Path(within).resolve()
    if real != path.absolute() and not real.is_relative_to(root):
        raise FlipgateError(
            f"{name}: a link to {real}, outside the project {root}; flipgate writes nothing "
            "through a link out of the project (replace the link with the file itself)"
        )
    if path.is_symlink() and not real.exists():
        raise FlipgateError(f"{name}: a link to {real}, which does not exist; nothing written")
    if real.exists() and not real.is_file():
        raise FlipgateError(f"{name}: {real} is not a regular file; nothing written")
    return real


def read_user_text(path: Path, name: str | None = None) -> str:
    """The UTF-8 text of a user's file, or one :class:`~flipgate.FlipgateError` line naming it (as
    ``name``, default its path) and its first bad byte instead of a UnicodeDecodeError."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(name or path, exc) from None
