"""A copy of this checkout, and a pip install into a folder of its own (user-project tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from support.paths import REPO


def copy_checkout(src: Path) -> Path:
    """A copy of this working tree's files (tracked and untracked, not ignored) in ``src``, to
    build from without writing into the checkout."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name, follow_symlinks=False)
    return src


def pip_install(site: Path, *sources: str) -> None:
    """Install ``sources`` into the folder ``site`` with no download: no dependencies (this
    interpreter has them), no index, no isolated build."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "--target", str(site), *sources],
        check=True,
        capture_output=True,
        timeout=600,
    )
