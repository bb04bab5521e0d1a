"""Bad-input cases run in-process: a models.yaml, thresholds, the message and status they end in."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from flipgate.exitcodes import USAGE_ERROR
from support.paths import REPO

MODELS = """
audit:
  items_per_dataset: 2
  bootstrap: {n: 100}
  facets:
    option_order: {datasets: [mmlu]}
models:
  - {id: m1, backend: hf, source: {path: /nonexistent}, readouts: [regex]}
"""


THRESHOLDS = "thresholds:\n  - {metric: flip_rate, max: 0.25}\n"


@dataclass
class Case:
    id: str
    models: str | bytes = MODELS
    thresholds: str | bytes = THRESHOLDS
    extra_files: dict | None = None  # thresholds dir name -> text
    args: tuple = ()
    expect: tuple = ()  # fragments the message must contain (file, field, value)
    status: int = USAGE_ERROR


def models_with(
    audit_facets: str = "option_order: {datasets: [mmlu]}",
    extra_audit: str = "",
    model: str = "{id: m1, backend: hf, source: {path: /nonexistent}, readouts: [regex]}",
) -> str:
    return (
        f"audit:\n  items_per_dataset: 2\n  facets:\n    {audit_facets}\n"
        + (f"  {extra_audit}\n" if extra_audit else "")
        + f"models:\n  - {model}\n"
    )


def th(*lines: str, head: str = "") -> str:
    return head + "thresholds:\n" + "".join(f"  - {line}\n" for line in lines)


def run_in_process(
    tmp: Path, case: Case, capsys, *paths: str, collect_only: bool = True
) -> tuple[int, str]:
    models = tmp / "models.yaml"
    models.write_bytes(
        case.models if isinstance(case.models, bytes) else textwrap.dedent(case.models).encode()
    )
    tdir = tmp / "thresholds"
    tdir.mkdir()
    if case.thresholds is not None:
        text = case.thresholds
        (tdir / "default.yaml").write_bytes(text if isinstance(text, bytes) else text.encode())
    for name, text in (case.extra_files or {}).items():
        (tdir / name).write_text(text)
    args = [
        *(
            paths
            or [
                str(REPO / "suites" / "order" / "test_option_order.py"),
                str(REPO / "suites" / "order" / "test_same_ordering.py"),
            ]
        ),
        "--models",
        str(models),
        "--thresholds",
        str(tdir),
        "--envelope",
        str(tmp / "no-envelope.yaml"),
        "--cache-dir",
        str(tmp / "cache"),
        "--runs-dir",
        str(tmp / "runs"),
        "--grid-cards-dir",
        str(tmp / "cards"),
        "--manifests-dir",
        str(tmp / "manifests"),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        *(["--collect-only"] if collect_only else []),
        *case.args,
    ]
    ours = sys.modules.get("conftest")  # the inner session must not replace tests/conftest.py
    path = list(sys.path)  # nor leave the repository root (suites/ is a package) first on it,
    try:  # where a spawned process would import the root conftest.py as `conftest`
        status = pytest.main([*args, "--confcutdir", str(REPO / "suites")])
    finally:
        sys.modules["conftest"] = ours
        sys.path[:] = path
    out = capsys.readouterr()
    return int(status), out.out + out.err
