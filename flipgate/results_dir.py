"""The Allure results folder of a bare ``pytest`` (the ini option ``flipgate_alluredir``): flipgate
empties it before each audit, so it empties only a folder it created and marked as its own, and
only of Allure's result files.

A folder flipgate creates (or finds empty, or holding Allure's result files and nothing else) gets
a marker file, :data:`MARKER`. Before an audit a
marked folder loses only the files Allure and flipgate write there (:func:`is_allure_result`);
anything else in it stays. The project folder, a folder holding the project, a file, and an
unmarked folder that holds anything are refused with one line naming the setting and its value:
one value in a config file must never delete a project (docs/configuration.md)."""

from __future__ import annotations

import re
from pathlib import Path

from allure_commons import hookimpl as allure_hook

from flipgate import FlipgateError, storage

#: the file that marks a folder flipgate created for Allure results
MARKER = ".flipgate-allure-results"
MARKER_TEXT = (
    "flipgate created this folder for Allure results: before each audit it deletes the Allure "
    "result files in it (nothing else). Delete this file and flipgate will not touch the folder.\n"
)
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: what allure-pytest (allure_commons.model2's file patterns, ``.tmp`` while it writes) and
#: flipgate (flipgate.report) write into a results folder
_ALLURE_FILE = re.compile(
    rf"(?:{_UUID}-(?:result|container|globals)\.json|{_UUID}-attachment\.[A-Za-z0-9]+)"
    r"(?:\.tmp)?|environment\.properties"
)


def is_allure_result(path: Path) -> bool:
    """A file Allure or flipgate writes into a results folder (by its name)."""
    return bool(_ALLURE_FILE.fullmatch(path.name)) and path.is_file() and not path.is_symlink()


def check_folder(path: Path, setting: str) -> None:
    """Refuse a results folder that is a file (Allure would fail creating it). ``setting`` names
    where the value came from (``--alluredir 'x'``, ``pyproject.toml's flipgate_alluredir =
    'x'``)."""
    if path.exists() and not path.is_dir():
        raise FlipgateError(f"{setting}: {path} is a file, not a folder; name a folder")


def prepare(path: Path, project: Path, setting: str) -> None:
    """Make ``path`` an empty Allure results folder of flipgate's own: create and mark it, or
    delete the Allure result files of a folder flipgate marked; refuse anything else (one
    FlipgateError line naming ``setting``)."""
    check_folder(path, setting)
    where, root = path.resolve(), project.resolve()
    if where == root or where in root.parents:
        raise FlipgateError(
            f"{setting}: {path} is the project folder or holds it; flipgate empties the Allure "
            "results folder before each audit, so name a folder of its own (e.g. "
            "reports/allure-results)"
        )
    with storage.guarded(_place(setting), path):
        if (path / MARKER).is_file():
            for entry in path.iterdir():
                if is_allure_result(entry):
                    entry.unlink(missing_ok=True)
            writable(path, setting)
            return
        entries = list(path.iterdir()) if path.is_dir() else []
        if entries and all(is_allure_result(entry) for entry in entries):
            for entry in entries:  # a folder of Allure's files only (one from before the
                entry.unlink(missing_ok=True)  # marker existed): adopted, marked below
        elif entries:
            raise FlipgateError(
                f"{setting}: {path} holds files flipgate did not write (it has no {MARKER} "
                "marker), so it is not emptied; name a new or empty folder (e.g. "
                "reports/allure-results), or empty this one yourself"
            )
        path.mkdir(parents=True, exist_ok=True)
        (path / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    writable(path, setting)


def writable(path: Path, setting: str) -> None:
    """Check a file can be written in the results folder (not read-only, the disk not full): one
    FlipgateError line naming ``setting`` before the run, not an INTERNALERROR during it."""
    storage.ensure_dir(_place(setting), path)


def ensure_folder(path: Path, setting: str) -> None:
    """A results folder the user named (``--alluredir``): created when missing, never emptied;
    a file or an unusable path is one FlipgateError line naming ``setting``."""
    check_folder(path, setting)
    storage.ensure_dir(_place(setting), path)  # names it "Allure results directory <path>"


def _place(setting: str) -> storage.Place:
    return storage.Place("Allure results", setting, "name another folder")


class WriteGuard:
    """allure-pytest's writes into the results folder (results, containers, attachments), wrapped
    in its own plugin manager: a disk error (full, read-only) is kept, the first one, and not
    raised, for pytest would stop with an INTERNALERROR and a page of traceback mid-run. The
    controller says it in one line at the end (:meth:`line`); the trials store and the cards are
    kept. Registered in every process (xdist workers write their own results)."""

    def __init__(self) -> None:
        self.error: OSError | None = None

    def _kept(self):
        try:
            return (yield)
        except OSError as exc:
            self.error = self.error or exc
            return None

    @allure_hook(wrapper=True)
    def report_result(self, result):
        return (yield from self._kept())

    @allure_hook(wrapper=True)
    def report_container(self, container):
        return (yield from self._kept())

    @allure_hook(wrapper=True)
    def report_attached_file(self, source, file_name):
        return (yield from self._kept())

    @allure_hook(wrapper=True)
    def report_attached_data(self, body, file_name):
        return (yield from self._kept())

    def line(self, path: Path, setting: str) -> str | None:
        """What went wrong writing the results folder, in one line (a write a worker could not
        make shows here too: the folder is probed again); None when nothing did."""
        if self.error is not None:
            return storage.describe(_place(setting), self.error.filename or path, self.error)
        try:
            writable(path, setting)
        except FlipgateError as exc:
            return str(exc)
        return None
