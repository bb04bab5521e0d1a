"""Running the suites as a user does: a models.yaml, the pytest command line, its run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.forked import IMPORT_TIME_ENV, run_pytest
from support.paths import REPO, write

PASSING = """
level: 0.95
thresholds:
  - {metric: parse_rate, min: 0.0, rule: point}
  - {metric: flip_rate, max: 1.0, rule: lower}
  - {metric: flip_rate, facet: same_ordering, max: 1.0, rule: upper}
  - {metric: l_local, facet: continuity, max: 1.0, rule: point}
"""


def models_yaml(path: Path, models: str, datasets="[arc_challenge, commonsense_qa]") -> Path:
    return write(
        path,
        f"""
audit:
  k: 6
  items_per_dataset: 3
  bootstrap: {{n: 200}}
  facets:
    option_order: {{datasets: {datasets}}}
models:
{models}
""",
    )


def suite_command(
    tmp: Path,
    models: Path,
    thresholds: Path,
    *extra: str,
    envelope: Path | None = None,
    odi: bool = False,
) -> list[str]:
    """The pytest command line of the suite as a user runs it, its outputs under ``tmp``; the
    envelope suite only when an ``envelope`` file is given, ODI's fits (half a minute to minutes
    of MCMC here) only when ``odi``."""
    where = (
        ["--envelope", str(envelope)]
        if envelope
        else ["--ignore", str(REPO / "suites" / "envelope")]
    )
    if not odi:
        where += ["--ignore", str(REPO / "suites" / "odi")]
    return [
        sys.executable,
        "-m",
        "pytest",
        str(REPO / "suites"),
        *where,
        "--models",
        str(models),
        "--thresholds",
        str(thresholds),
        "--cache-dir",
        str(tmp / "cache"),
        "--runs-dir",
        str(tmp / "runs"),
        "--grid-cards-dir",
        str(tmp / "cards"),
        "--manifests-dir",
        str(tmp / "manifests"),
        "--alluredir",
        str(tmp / "allure"),
        "-q",
        "-p",
        "no:randomly",
        *extra,
    ]


def suite_env(**extra: str) -> dict[str, str]:
    """A run of its own: not an xdist worker even when this test runs in one (PYTEST_XDIST_*),
    offline, with litellm's bundled price map (what the fork server imported its libraries
    with)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return env | IMPORT_TIME_ENV | extra


def run_suite(
    tmp: Path,
    models: Path,
    thresholds: Path,
    *extra: str,
    envelope: Path | None = None,
    odi: bool = False,
) -> subprocess.CompletedProcess:
    """The suite as a user runs it (:func:`suite_command`), to its end, in a process of its own
    forked from one that has the heavy libraries imported (:mod:`support.forked`)."""
    cmd = suite_command(tmp, models, thresholds, *extra, envelope=envelope, odi=odi)
    assert cmd[1:3] == ["-m", "pytest"]
    return run_pytest(cmd[3:], suite_env(), timeout=600)
