"""``python -m pytest`` runs of the suites (and ``python -m flipgate`` commands), each in a
process of its own, forked from a server that has already imported the heavy libraries every
audit imports (torch, transformers' Llama modelling, litellm, scipy, pandas, matplotlib: ~13 s a
process on this CPU, more than a small audit's own work).

Python's ``forkserver`` start method: one server per test process, started at the first run,
imports :data:`PRELOAD` and forks a child per run. The child is a fresh process in every way a
test can see: its own environment (set before anything reads it), working directory, argv,
``sys.path`` as ``python -m`` sets it, standard output and error, exit status, signals and atexit
handlers. Nothing of flipgate, pytest's plugins or the suites is preloaded: pytest rewrites the
assertions of a plugin's modules when it imports them, which it cannot do to a module already
loaded. Only the environment variables that the preloaded libraries read at import
(:data:`IMPORT_TIME_ENV`) are the server's, and every run sets them the same (``suite_env``)."""

from __future__ import annotations

import atexit
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

#: imported once by the server (no computation: forking after it is safe)
PRELOAD = ["support.forked_preload"]

#: what the preloaded libraries read from the environment when they are imported
IMPORT_TIME_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm's price map: the bundled one, as CI sets
}

#: this checkout's tests/, where the server finds :data:`PRELOAD`
TESTS = Path(__file__).resolve().parents[1]

_context: multiprocessing.context.ForkServerContext | None = None


def _server() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _start(process: multiprocessing.process.BaseProcess) -> None:
    """Start ``process``, and the server first if it is not running: with the environment the
    preloaded libraries read at import, this checkout's tests/ on its path (Python 3.11's server
    ignores the parent's ``sys.path``) and no xdist worker's variables."""
    saved = dict(os.environ)
    os.environ.update(IMPORT_TIME_ENV, PYTHONPATH=str(TESTS))
    for key in [k for k in os.environ if k.startswith("PYTEST_XDIST")]:
        del os.environ[key]
    try:
        process.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _child(module: str, argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the forked process: the run's environment, directory and streams, then ``python -m
    module``; its ``SystemExit`` is the process's exit status, as for the interpreter."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    # the path a fresh `python -m` would have: its directory, then its PYTHONPATH, not the
    # server's (this checkout's tests/)
    run_path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [cwd, *run_path, *(p for p in sys.path if p != str(TESTS))]
    try:
        if module == "pytest":
            # anyio (httpx's, so transformers') is a pytest plugin, loaded here before pytest
            # could rewrite its asserts: that warning is the server's, not the run's
            sys.argv = ["pytest", *argv, "-W", "ignore::pytest.PytestAssertRewriteWarning"]
            import pytest

            sys.exit(pytest.console_main())
        sys.argv = [module, *argv]  # runpy puts the module's file first, as python -m does
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        atexit._run_exitfuncs()  # multiprocessing ends the child with os._exit
        sys.stdout.flush()
        sys.stderr.flush()


def run_module(
    module: str,
    args: Sequence[str],
    env: dict[str, str],
    timeout: float,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    """``python -m module *args`` in ``cwd`` (default: this process's) with ``env``, to its end:
    what :func:`subprocess.run` with ``capture_output=True, text=True`` returns."""
    missing = {k: v for k, v in IMPORT_TIME_ENV.items() if env.get(k) != v}
    if missing:
        raise ValueError(f"a forked run needs {missing} in its environment (the server's)")
    command = [sys.executable, "-m", module, *args]
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        cwd_ = str(cwd or os.getcwd())
        process = _server().Process(target=_child, args=(module, list(args), env, cwd_, out, err))
        _start(process)
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(command, timeout)
        stdout, stderr = (Path(p).read_text(errors="replace") for p in (out, err))
    return subprocess.CompletedProcess(command, process.exitcode, stdout, stderr)


def run_pytest(
    args: Sequence[str], env: dict[str, str], timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``python -m pytest *args``: :func:`run_module`."""
    return run_module("pytest", args, env, timeout, cwd)
