"""``flipgate <command>`` (or ``python -m flipgate <command>``): the parts of flipgate that work
without pytest.

init [DIR]                   lay out a project: models.yaml, thresholds/, pytest section, CI
compare BASELINE CANDIDATE   paired regression table of two runs (exit 0 / 1 regression / 4 usage)
baseline [RUN]               promote a run (default: the latest) to reports/baseline/
card --into README.md        merge GRID sections and model-index into a Hugging Face model card
                             (several models: --model ID, or --into DIR/ for DIR/<model>/README.md;
                             --eval-results: the .eval_results/ files beside it too)
export eval-results --out DIR   a model's cards as Hugging Face DIR/.eval_results/*.yaml files
export every-eval-ever --out DIR   the cards as Every Eval Ever logs (DIR: the data/ directory)
prepare                      dequantise / download every local model once (make setup runs it)
generate-paraphrases         rewrite decomposition items with a model, stored unchecked
serve-llamacpp GGUF --port N llama.cpp's server on a GGUF file (the `servers` extra), as a
                             `server: {engine: llama.cpp}` block starts it (docs/servers.md)

Exit statuses are an audit's (flipgate/exitcodes.py): a usage error or bad input is 4, with one
line on stderr starting ``flipgate: ``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from flipgate.exitcodes import GATE_PASSED, USAGE_ERROR

COMMANDS = {
    "init": "flipgate.init:init_main",
    "compare": "flipgate.regression.cli:compare_main",
    "baseline": "flipgate.regression.cli:promote_main",
    "card": "flipgate.exports.model_card:card_main",
    "export": "flipgate.exports.cli:export_main",
    "prepare": "flipgate.prepare:prepare_main",
    "generate-paraphrases": "flipgate.decomposition.generate:generate_main",
    "serve-llamacpp": "flipgate.serve_llamacpp:serve_llamacpp_main",
}
#: the commands that take the registered suites too (a core module cannot import the registry)
WITH_SUITES = {"card"}


def _own(module: str | None) -> bool:
    """Whether ``module`` is flipgate's own (a missing one of those is a bug, not a setup
    problem)."""
    return module is None or module == "flipgate" or module.startswith("flipgate.")


def install_hint() -> str:
    """How to install flipgate's dependencies into this interpreter: the source checkout's path
    when flipgate runs from one, else its name."""
    root = Path(__file__).resolve().parent.parent
    target = str(root) if (root / "pyproject.toml").is_file() else "flipgate"
    return f"{sys.executable} -m pip install {target}"


def missing_dependency(command: str, exc: ImportError) -> str:
    """The one line for a dependency this interpreter cannot import."""
    why = " ".join(str(exc).split())
    return (
        f"flipgate: {command} needs the module {exc.name!r}, which this Python cannot import "
        f"({why}); install flipgate's dependencies: {install_hint()}"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr)
        if argv and argv[0] in ("-h", "--help"):
            return GATE_PASSED
        if argv:
            print(
                f"flipgate: unknown command {argv[0]!r} (commands: {', '.join(COMMANDS)})",
                file=sys.stderr,
            )
        return USAGE_ERROR
    try:
        return _run(argv[0], argv[1:])
    except ImportError as exc:  # ModuleNotFoundError included
        if _own(exc.name):
            raise
        print(missing_dependency(argv[0], exc), file=sys.stderr)
        return USAGE_ERROR


def _run(name: str, args: list[str]) -> int:
    from flipgate import FlipgateError, registry

    try:
        suites = registry.suites()  # installed suites' metrics and settings, for the files read
    except FlipgateError as exc:
        print(f"flipgate: {exc}", file=sys.stderr)
        return USAGE_ERROR
    module, _, func = COMMANDS[name].partition(":")
    command = getattr(__import__(module, fromlist=[func]), func)
    return command(args, suites) if name in WITH_SUITES else command(args)


if __name__ == "__main__":
    sys.exit(main())
