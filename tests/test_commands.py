"""``python -m flipgate <command>``: every command exits with an audit's statuses
(flipgate/exitcodes.py), a usage error 4 with one ``flipgate: `` line, and a dependency its
interpreter cannot import is that one line too, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flipgate.__main__ import COMMANDS, main
from flipgate.exitcodes import GATE_PASSED, USAGE_ERROR

REPO = Path(__file__).resolve().parents[1]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flipgate: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_exits_4_on_a_usage_error(command, capsys):
    assert main([command, "--no-such-option"]) == USAGE_ERROR
    out, err = capsys.readouterr()
    line = one_line(err)  # a missing required argument, or the unknown option, named
    assert out == "" and line.startswith(f"flipgate: python -m flipgate {command}: "), line
    assert "--no-such-option" in line or "arguments are required" in line, line


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_help_exits_0(command, capsys):
    assert main([command, "--help"]) == GATE_PASSED
    assert "usage:" in capsys.readouterr().out


def test_no_or_unknown_command_exits_4(capsys):
    assert main([]) == USAGE_ERROR
    assert "compare BASELINE CANDIDATE" in capsys.readouterr().err
    assert main(["compair", "a", "b"]) == USAGE_ERROR
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        "flipgate: unknown command 'compair' (commands: init, compare, baseline, card, export, "
        "prepare, generate-paraphrases)"
    )
    assert main(["--help"]) == GATE_PASSED


def run_without(module: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m flipgate ARGS`` in an interpreter where ``module`` cannot be imported (None in
    sys.modules: an import of it raises ModuleNotFoundError, as when it is not installed)."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; from flipgate.__main__ import main; "
        f"sys.exit(main({list(args)!r}))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )


@pytest.mark.parametrize(
    "module, args",
    [
        ("pandas", ("compare", "a", "b")),
        ("yaml", ("baseline", "nowhere")),
        ("jsonschema", ("card", "--into", "README.md")),
    ],
)
def test_a_missing_dependency_is_one_line_and_exit_4(module, args):
    proc = run_without(module, *args)
    assert proc.returncode == USAGE_ERROR, proc.stderr
    line = one_line(proc.stderr)
    assert line.startswith(f"flipgate: {args[0]} needs the module {module!r}"), line
    assert f"{sys.executable} -m pip install {REPO}" in line, line  # the remedy, for this Python


def test_a_missing_flipgate_module_is_a_bug_and_raises():
    proc = run_without("flipgate.regression.table", "compare", "a", "b")
    assert proc.returncode == 1 and "Traceback" in proc.stderr, proc.stderr
    assert "ModuleNotFoundError" in proc.stderr and "needs the module" not in proc.stderr
