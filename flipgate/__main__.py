"""``flipgate <command>`` (or ``python -m flipgate <command>``): the parts of flipgate that work
without pytest.

init [DIR]                   lay out a project of its own: models.yaml, thresholds/, pytest section, CI
compare BASELINE CANDIDATE   paired regression table of two runs (exit 0 / 1 regression / 2 usage)
baseline [RUN]               promote a run (default: the latest) to reports/baseline/
card --into README.md        merge GRID sections and model-index into a Hugging Face model card
prepare                      dequantise / download every local model once (make setup runs it)
generate-paraphrases         rewrite decomposition items with a model, stored unchecked
"""

from __future__ import annotations

import sys

COMMANDS = {
    "init": "flipgate.init:init_main",
    "compare": "flipgate.regression.cli:compare_main",
    "baseline": "flipgate.regression.cli:promote_main",
    "card": "flipgate.cards.cli:card_main",
    "prepare": "flipgate.prepare:prepare_main",
    "generate-paraphrases": "flipgate.decomposition.generate:generate_main",
}
#: the commands that take the registered suites too (a core module cannot import the registry)
WITH_SUITES = {"card"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    from flipgate import FlipgateError, registry

    try:
        suites = registry.suites()  # installed suites' metrics and settings, for the files read
    except FlipgateError as exc:
        print(f"flipgate: {exc}", file=sys.stderr)
        return 2
    module, _, func = COMMANDS[argv[0]].partition(":")
    command = getattr(__import__(module, fromlist=[func]), func)
    return command(argv[1:], suites) if argv[0] in WITH_SUITES else command(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
