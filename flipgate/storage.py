"""One error path for what flipgate keeps on disk: the runs store, the response cache, manifests,
GRID cards and baselines. Opening a SQLite database, writing a file, making a directory or taking a
lock goes through here, and an ``OSError`` or ``sqlite3.DatabaseError`` becomes one
:class:`~flipgate.FlipgateError` line that names the file, what is wrong with it and what to do
(free disk space, make it writable, point the option elsewhere, move a corrupt file aside)."""

from __future__ import annotations

import datetime as dt
import errno
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from filelock import FileLock

from flipgate import FlipgateError
from flipgate.files import atomic_write
from flipgate.sqlite_util import connect as _connect

T = TypeVar("T")


class StorageWarning(UserWarning):
    """A cache flipgate could not write or read: the run goes on without it."""


@dataclass(frozen=True)
class Place:
    """A kind of file flipgate keeps: how messages name it, the option that moves it, and what to
    do when a file of it is corrupt."""

    what: str
    option: str
    corrupt: str


RUNS = Place(
    "trials store",
    "--runs-dir",
    "it is written by this run: start the run again, with another --runs-dir",
)
CACHE = Place(
    "response cache",
    "--cache-dir",
    "rerun with --reset-cache to move it aside (to <name>.corrupt-<time>) and start a fresh one",
)
MANIFEST = Place(
    "manifest",
    "--manifests-dir",
    "delete it to regenerate it: a manifest is redrawn from the grammar (docs/manifests.md)",
)
CARDS = Place("GRID card", "--grid-cards-dir", "delete it: the run writes it again")

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_DENIED = {errno.EROFS, errno.EACCES, errno.EPERM}
_IN_THE_WAY = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR}
#: SQLite result codes (``sqlite_errorname``) by what they mean for the user
_SQLITE = {
    "SQLITE_FULL": "full",
    "SQLITE_READONLY": "denied",
    "SQLITE_PERM": "denied",
    "SQLITE_CANTOPEN": "denied",
    "SQLITE_CORRUPT": "corrupt",
    "SQLITE_NOTADB": "corrupt",
}


def is_storage_error(exc: BaseException) -> bool:
    """An error of the disk or of a database file, not of flipgate's own SQL."""
    if isinstance(exc, OSError):
        return True
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(
        exc, (sqlite3.ProgrammingError, sqlite3.IntegrityError, sqlite3.InterfaceError)
    )


def _kind(exc: BaseException) -> str:
    """full, denied, in_the_way, corrupt or other."""
    if isinstance(exc, OSError):
        if exc.errno in _FULL:
            return "full"
        if exc.errno in _DENIED:
            return "denied"
        if exc.errno in _IN_THE_WAY:
            return "in_the_way"
        return "other"
    name = str(getattr(exc, "sqlite_errorname", ""))
    for prefix, kind in _SQLITE.items():
        if name.startswith(prefix):
            return kind
    if name.startswith("SQLITE_IOERR") and "SHORT_READ" in name:
        return "corrupt"  # a truncated file
    return "corrupt" if type(exc) is sqlite3.DatabaseError else "other"


def _blocker(path: Path) -> Path | None:
    """The nearest of ``path`` and its parents that exists and is not a directory."""
    for part in (path, *path.parents):
        if part.exists() or part.is_symlink():
            return None if part.is_dir() else part
    return None


def describe(place: Place, path: Path | str, exc: BaseException) -> str:
    """One line: the file, what is wrong with it (as the OS or SQLite says) and what to do."""
    path = Path(path)
    said = " ".join(str(exc).split()) or type(exc).__name__
    kind = _kind(exc)
    blocker = _blocker(path.parent) if kind in ("in_the_way", "denied", "other") else None
    if blocker is not None:
        return (
            f"{place.what} {path}: cannot create it, {blocker} is a file, not a directory "
            f"({said}); point {place.option} at a directory"
        )
    if kind == "full":
        problem, remedy = "the disk is full", f"free disk space or point {place.option} elsewhere"
    elif kind == "denied":
        problem, remedy = "not writable", f"make it writable or point {place.option} elsewhere"
    elif kind == "in_the_way":
        problem, remedy = "in the way", f"point {place.option} at a directory"
    elif kind == "corrupt":
        problem, remedy = "corrupt or not a SQLite database", place.corrupt
    else:
        problem, remedy = "cannot be used", f"check it, or point {place.option} elsewhere"
    return f"{place.what} {path}: {problem} ({said}); {remedy}"


def error(place: Place, path: Path | str, exc: BaseException) -> FlipgateError:
    return FlipgateError(describe(place, path, exc))


@contextmanager
def guarded(place: Place, path: Path | str) -> Iterator[None]:
    """Turn a disk or database error in the body into one :class:`FlipgateError` line."""
    try:
        yield
    except FlipgateError:
        raise
    except Exception as exc:
        if not is_storage_error(exc):
            raise
        raise error(place, path, exc) from None


def call(place: Place, path: Path | str, body: Callable[[], T]) -> T:
    """``body()``, its disk or database error one :class:`FlipgateError` line."""
    with guarded(place, path):
        return body()


def connect(place: Place, path: Path | str, schema: str) -> sqlite3.Connection:
    """A WAL connection to the database at ``path`` (created with ``schema``)."""
    return call(place, path, lambda: _connect(path, schema))


def check(place: Place, path: Path | str, conn: sqlite3.Connection) -> None:
    """Read every page of the database (``PRAGMA quick_check``): a truncated or overwritten file
    is a corrupt one here, not an error halfway through a run."""

    def body() -> None:
        rows = conn.execute("PRAGMA quick_check").fetchall()
        if [r[0] for r in rows] != ["ok"]:
            raise sqlite3.DatabaseError(f"quick_check: {rows[0][0]}")

    call(place, path, body)


def write_text(place: Place, path: Path | str, text: str) -> None:
    """Write ``path`` atomically (:func:`flipgate.files.atomic_write`)."""
    call(place, path, lambda: atomic_write(path, text))


def ensure_dir(place: Place, path: Path | str) -> Path:
    """Create the directory ``path`` (and its parents) and check a file can be written in it."""
    path = Path(path)

    def body() -> None:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".flipgate-probe-")
        os.close(fd)
        os.unlink(probe)

    if path.exists() and not path.is_dir():
        raise FlipgateError(
            f"{place.what} directory {path}: is a file, not a directory; "
            f"point {place.option} at a directory"
        )
    with guarded(Place(f"{place.what} directory", place.option, place.corrupt), path):
        body()
    return path


def move_aside(path: Path | str, why: str = "corrupt") -> Path | None:
    """Rename ``path`` (and its ``-wal`` / ``-shm`` files) to ``<name>.<why>-<time>``; None when
    there is no such file."""
    path = Path(path)
    if not path.exists():
        return None
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.{why}-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        old = Path(f"{path}{suffix}")
        if old.exists():
            old.replace(Path(f"{target}{suffix}"))
    return target


@contextmanager
def lock(path: Path | str) -> Iterator[None]:
    """An exclusive lock between processes (xdist workers) on ``path``, a native
    ``filelock.FileLock`` that leaves no file behind: the holder unlinks the lock file while it
    still holds it. A waiter re-opens the path on every poll, so it then locks a new file; one that
    opened the old file just before the unlink finds it unlinked once it gets the lock, and
    filelock drops such a lock and tries again, so holders stay mutually exclusive."""
    path = Path(path)
    with FileLock(str(path)):
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
