"""Inference servers that flipgate starts itself, so an audit reaches a real engine over HTTP
through the ``litellm`` backend (docs/servers.md):

- ``llama.cpp``: llama.cpp's own server on a GGUF file *as shipped* (its quantised weights compute
  as they do in llama.cpp, ollama or LM Studio), from the prebuilt wheel ``xllamacpp``;
- ``transformers``: Hugging Face's ``transformers serve`` on a model folder (a GGUF source is
  served from flipgate's dequantised copy, the one the ``hf`` backend loads).

A server listens on 127.0.0.1 at a free port, is asked ``/health`` until it is ready, and is
stopped when its owner stops it or its process ends (on Linux the kernel also ends it when the
process that started it dies). A server that exits or never gets ready raises one
:class:`~flipgate.FlipgateError` line naming the engine, its last log line and the log file.

    python -m flipgate.backends.servers llama.cpp MODEL.gguf --port 8080 --threads 2

runs the llama.cpp server in the foreground (what :func:`launch` starts for ``llama.cpp``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flipgate import FlipgateError
from flipgate.backends.gguf_header import header_value

ENGINES = ("llama.cpp", "transformers")
#: what an engine needs installed, and how to get it
PACKAGES = {
    "llama.cpp": ("xllamacpp", "pip install xllamacpp (or flipgate[servers])"),
    "transformers": ("fastapi", "pip install 'transformers[serving]' (or flipgate[servers])"),
}
#: the model name a server answers to (``litellm`` asks for ``openai/<name>``)
SERVED_NAME = "flipgate-served"


def engine_version(engine: str) -> str:
    """The engine and its package version, e.g. ``llama.cpp (xllamacpp 2026.10.11549)``."""
    if engine == "llama.cpp":
        return f"llama.cpp server (xllamacpp {importlib.metadata.version('xllamacpp')})"
    return f"transformers serve {importlib.metadata.version('transformers')}"


def require_engine(engine: str, model_id: str) -> None:
    """A clear error when ``engine`` is unknown or its package is not installed."""
    if engine not in ENGINES:
        raise FlipgateError(
            f"model {model_id!r}: field server.engine {engine!r} is not one of {list(ENGINES)}"
        )
    package, how = PACKAGES[engine]
    try:
        importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        raise FlipgateError(
            f"model {model_id!r}: server.engine {engine!r} needs the package {package!r}: {how}"
        ) from None


def gguf_quantization(path: Path, what: str = "server") -> str | None:
    """The GGUF file type (``Q4_1``, ``Q4_K_M``, ...) its header declares; None if it has none."""
    import gguf

    try:
        value = header_value(path, "general.file_type")
    except (OSError, ValueError) as exc:  # not a GGUF file, or a truncated one
        raise FlipgateError(
            f"{what}: {str(path)!r} is not a readable GGUF file ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]})"
        ) from None
    if value is None:
        return None
    try:
        return gguf.LlamaFileType(int(value)).name.removeprefix("MOSTLY_")
    except (TypeError, ValueError):
        return f"file_type {value}"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """Linux: this process (a server) gets SIGTERM when the process that started it dies, so no
    server outlives its audit. Called by the server process itself, first thing: a
    ``preexec_fn`` would force a fork of the multithreaded parent (JAX warns of deadlocks)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class ServerSpec:
    """One server: ``model`` is a GGUF file (llama.cpp) or a model folder (transformers)."""

    engine: str
    model: Path
    threads: int | None = None
    context: int = 4096
    parallel: int = 4
    dtype: str = "float32"
    start_timeout_s: float = 300.0
    host: str = "127.0.0.1"

    def settings(self) -> dict[str, Any]:
        """What changes the server's answers or speed (recorded in the card's receipt)."""
        out: dict[str, Any] = {
            "threads": self.threads or "engine default",
            "parallel": self.parallel,
        }
        if self.engine == "llama.cpp":
            out.update(context=self.context, context_per_slot=self.context // self.parallel)
        else:
            out.update(dtype=self.dtype, device="cpu")
        return out

    def command(self, port: int) -> list[str]:
        if self.engine == "llama.cpp":
            cmd = [sys.executable, "-m", "flipgate.backends.servers", "llama.cpp", str(self.model)]
            cmd += ["--port", str(port), "--host", self.host, "--context", str(self.context)]
            cmd += ["--parallel", str(self.parallel)]
            return cmd + (["--threads", str(self.threads)] if self.threads else [])
        main = (
            "import sys; from flipgate.backends.servers import die_with_parent; die_with_parent(); "
            "from transformers.cli.transformers import main; sys.exit(main())"
        )
        cmd = [sys.executable, "-c", main, "serve", str(self.model), "--host", self.host]
        return cmd + ["--port", str(port), "--device", "cpu", "--dtype", self.dtype]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.engine == "transformers" and self.threads:
            env["OMP_NUM_THREADS"] = str(self.threads)
        return env


@dataclass
class Server:
    """A started server: ``base_url`` is its OpenAI-compatible root (``.../v1``)."""

    spec: ServerSpec
    port: int
    process: subprocess.Popen
    log_path: Path
    served_name: str
    _stopped: bool = field(default=False, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{self.spec.host}:{self.port}/v1"

    def last_log_line(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return next((line.strip() for line in reversed(lines) if line.strip()), "")

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def launch(spec: ServerSpec, what: str = "server") -> Server:
    """Start ``spec``'s server on a free port and wait until it answers ``/health``; ``what``
    names it in errors (e.g. ``model 'x'``)."""
    if not spec.model.exists():
        raise FlipgateError(f"{what}: {spec.engine} server: model {str(spec.model)!r} not found")
    port = free_port(spec.host)
    fd, log = tempfile.mkstemp(prefix=f"flipgate-{spec.engine}-", suffix=".log")
    with os.fdopen(fd, "w") as log_file:
        process = subprocess.Popen(
            spec.command(port),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=spec.environment(),
        )
    name = SERVED_NAME if spec.engine == "llama.cpp" else str(spec.model)
    server = Server(spec, port, process, Path(log), name)
    deadline = time.monotonic() + spec.start_timeout_s
    health = f"http://{spec.host}:{port}/health"
    while True:
        status = process.poll()
        if status is not None:
            raise FlipgateError(
                f"{what}: {spec.engine} server exited with status {status} before it was ready: "
                f"{server.last_log_line()!r} (log: {log})"
            )
        try:
            with urllib.request.urlopen(health, timeout=2) as reply:
                if reply.status == 200:
                    return server
        except (urllib.error.URLError, OSError):  # not listening yet, or 503 while loading
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise FlipgateError(
                f"{what}: {spec.engine} server not ready after {spec.start_timeout_s:.0f} s: "
                f"{server.last_log_line()!r} (log: {log})"
            )
        time.sleep(0.25)


class ManagedServer:
    """The server a ``litellm`` entry's ``server`` block asks flipgate to start: the engine
    serving the weights its ``source`` names (the same forms as an ``hf`` entry), started on
    first use and stopped when the process ends. Its identity (engine, version, weights digest,
    quantisation, settings) is fixed at construction, before any start: it keys the response
    cache and fills the card's receipt; the port, different each run, does neither."""

    def __init__(self, cfg: dict[str, Any], cache_dir: Path):
        from flipgate.backends.hf import resolve_source, weight_files
        from flipgate.backends.precision import resolve_dtype
        from flipgate.hashing import sha256_file, sha256_files

        self.model_id = model_id = cfg["id"]
        block = dict(cfg["server"])
        engine = block.get("engine")
        require_engine(str(engine), model_id)
        folder, gguf = resolve_source(cfg.get("source") or {}, model_id)
        self.cache_dir = cache_dir
        self._gguf: tuple[str, str] | None = None
        if engine == "llama.cpp":
            if not gguf:
                raise FlipgateError(
                    f"model {model_id!r}: server.engine 'llama.cpp' serves a GGUF file, and "
                    f"source names none (folder {folder!r}; give source.gguf_file or a .gguf path)"
                )
            model = Path(folder) / gguf
            self.weights_sha256 = sha256_file(model)
            self.quantization = gguf_quantization(model, f"model {model_id!r}")
        elif gguf:  # served from the dequantised copy the hf backend loads
            self.weights_sha256 = sha256_file(Path(folder) / gguf)
            self._gguf = (folder, gguf)
            model = cache_dir / "models" / self.weights_sha256[:16]
            self.quantization = None
        else:
            model = Path(folder)
            if not model.is_dir():
                raise FlipgateError(
                    f"model {model_id!r}: server.engine 'transformers' serves a local model "
                    f"folder or GGUF file; source {folder!r} is neither"
                )
            self.weights_sha256 = sha256_files(weight_files(model))
            self.quantization = None
        self.spec = ServerSpec(
            engine=str(engine),
            model=model,
            threads=block.get("threads"),
            context=int(block.get("context", 4096)),
            parallel=int(block.get("parallel", 4)),
            # a transformers server computes in float32 unless told: auto as the hf backend's
            dtype=resolve_dtype(cfg.get("dtype") or "float32").dtype,
            start_timeout_s=float(block.get("start_timeout_s", 300.0)),
        )
        self.engine = engine_version(self.spec.engine)
        self.served_name = SERVED_NAME if engine == "llama.cpp" else str(model)
        self._server: Server | None = None

    @property
    def settings(self) -> dict[str, Any]:
        """The server's settings that can change its answers (threads only change its speed)."""
        return {k: v for k, v in self.spec.settings().items() if k != "threads"}

    def base_url(self) -> str:
        """The running server's ``.../v1``; started (and its stop registered) on first call."""
        if self._server is None or self._server.process.poll() is not None:
            import atexit

            if self._gguf is not None:
                from flipgate.backends.hf import dequantised_gguf

                dequantised_gguf(*self._gguf, self.weights_sha256, self.cache_dir)
            self._server = launch(self.spec, f"model {self.model_id!r}")
            atexit.register(self._server.stop)
        return self._server.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()


def _serve_llama_cpp(argv: list[str]) -> int:
    """The llama.cpp server in this process, until SIGTERM/SIGINT."""
    die_with_parent()
    parser = argparse.ArgumentParser(prog="python -m flipgate.backends.servers llama.cpp")
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {SERVED_NAME}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.context
    params.n_parallel = args.parallel
    if args.threads:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    stop = {"now": False}

    def on_signal(*_: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = xllamacpp.Server(params)
    print(f"flipgate: llama.cpp server listening on {server.listening_address}", flush=True)
    while not stop["now"]:
        time.sleep(0.2)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "llama.cpp":
        print("usage: python -m flipgate.backends.servers llama.cpp MODEL.gguf [options]")
        return 4
    return _serve_llama_cpp(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
