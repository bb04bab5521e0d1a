"""``python -m flipgate serve-llamacpp GGUF``: llama.cpp's server from the installed xllamacpp
on a GGUF file, in the foreground, started as a models.yaml entry's ``server: {engine:
llama.cpp}`` block starts it (docs/servers.md)."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

from flipgate import FlipgateError
from flipgate.cli import Parser, run_command


def _serve_llamacpp(argv: list[str]) -> int:
    from flipgate.backends import servers

    p = Parser(
        prog="python -m flipgate serve-llamacpp",
        description="Serve a GGUF file with llama.cpp's server from the installed xllamacpp "
        "(pip install 'flipgate[servers]'), in the foreground until Ctrl-C: the same server, "
        "started the same way, as a models.yaml entry's `server: {engine: llama.cpp}` block. "
        f"It answers an OpenAI-compatible API at http://HOST:PORT/v1 as model "
        f"{servers.SERVED_NAME!r} (docs/servers.md).",
    )
    p.add_argument("gguf", metavar="GGUF", help="the GGUF file to serve")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument(
        "--context", type=int, default=4096, help="context in tokens, shared by the slots"
    )
    p.add_argument("--parallel", type=int, default=4, help="slots: requests served at once")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: llama.cpp's)")
    args = p.parse_args(argv)
    for option in ("port", "context", "parallel", "threads"):
        value = getattr(args, option)
        if value is not None and (value < 1 or (option == "port" and value > 65535)):
            raise FlipgateError(f"option --{option} {value}: out of range")
    gguf = Path(args.gguf)
    if not gguf.is_file():
        raise FlipgateError(f"argument GGUF {args.gguf!r}: no such file")
    package, how = servers.PACKAGES["llama.cpp"]
    if importlib.util.find_spec(package) is None:
        raise FlipgateError(f"serve-llamacpp needs the package {package!r}: {how}")
    quantization = servers.gguf_quantization(gguf, "argument GGUF")
    with socket.socket() as probe:
        try:
            probe.bind((args.host, args.port))
        except OSError as exc:
            raise FlipgateError(f"option --port {args.port}: cannot listen on {args.host} ({exc})")
    spec = servers.ServerSpec(
        "llama.cpp", gguf, args.threads, args.context, args.parallel, host=args.host
    )
    base = f"http://{args.host}:{args.port}/v1"
    declared = quantization or "no quantisation declared"
    entry = (
        f"backend: litellm, source: {{model: openai/{servers.SERVED_NAME}, api_base: {base}, "
        "api_key_env: ANY_SET_VARIABLE}, answer_prefill: true"
    )
    print(
        f"flipgate: {servers.engine_version('llama.cpp')} serving {gguf} ({declared}) at {base} "
        f"as model {servers.SERVED_NAME!r}; a models.yaml entry: {entry} (docs/servers.md); "
        "Ctrl-C stops",
        flush=True,
    )
    command = spec.command(args.port)  # the managed server's own command line, run here
    return servers.main(command[command.index(servers.__name__) + 1 :])


def serve_llamacpp_main(argv: list[str] | None = None) -> int:
    """``flipgate serve-llamacpp GGUF [--port N] ...``; returns the exit status."""
    return run_command(_serve_llamacpp, argv)
