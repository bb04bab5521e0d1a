"""Plumbing shared by the ``python -m flipgate`` commands: usage and input errors are one line on
stderr starting ``flipgate: `` and exit status 4 (:data:`flipgate.exitcodes.USAGE_ERROR`, as from an
audit), never a traceback."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Callable

from flipgate import FlipgateError
from flipgate.exitcodes import GATE_FAILED, GATE_PASSED, USAGE_ERROR

#: exit statuses of the commands: those of an audit (flipgate/exitcodes.py)
OK, FAILED, USAGE = GATE_PASSED, GATE_FAILED, USAGE_ERROR


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as a FlipgateError (one line) instead of its usage
    block."""

    def error(self, message):
        raise FlipgateError(f"{self.prog}: {message} (see {self.prog} --help)")


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def run_command(body: Callable[[list[str]], int], argv: list[str] | None) -> int:
    """Run a command body on its arguments (those after the command name) and return its exit
    status: a FlipgateError, an unreadable store or an OS error is one ``flipgate: `` line and
    status 4 (USAGE)."""
    try:
        return body(list(argv or []))
    except SystemExit as exc:  # --help, or argparse exiting by itself
        return exc.code if isinstance(exc.code, int) else (OK if exc.code is None else USAGE)
    except FlipgateError as exc:
        print(f"flipgate: {one_line(exc)}", file=sys.stderr)
    except (sqlite3.DatabaseError, json.JSONDecodeError) as exc:
        print(
            f"flipgate: could not read a trials store ({type(exc).__name__}: {one_line(exc)})",
            file=sys.stderr,
        )
    except OSError as exc:
        print(f"flipgate: {one_line(exc)}", file=sys.stderr)
    return USAGE
