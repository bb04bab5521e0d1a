"""flipgate in a project of its own (docs/your-project.md): installed from this checkout (not
editable), ``flipgate init`` in an empty folder outside the repository, a bare ``pytest -n 2`` is
the audit and writes only inside that folder, ``flipgate baseline`` promotes it and the next bare
run compares with it. Also: ``init`` never overwrites, and a bare ``pytest`` here is the audit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.checkouts import copy_checkout, pip_install
from support.forked import run_module, run_pytest
from support.paths import REPO
from support.suite_runs import suite_env

from flipgate.registry import BUILTIN

#: every test here runs audits, servers or fits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow

INIT_FILES = {
    ".github/workflows/flipgate.yml",
    ".gitignore",
    "allurerc.mjs",
    "conftest.py",
    "models.yaml",
    "pyproject.toml",
    "thresholds/default.yaml",
}


def _env(site: Path, tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return env | {
        "PYTHONPATH": str(site),  # the installed copy, before this checkout's editable install
        "FLIPGATE_CACHE_HOME": str(tmp / "user-cache"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


#: where a virtual environment inside the project installs packages (a user's usual layout)
VENV_SITE = f".venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of this working tree to install from, so the build writes nothing into the
    checkout."""
    return copy_checkout(tmp_path_factory.mktemp("install") / "src")


@pytest.fixture(scope="module")
def project(source, tiny_model_dir, tmp_path_factory):
    """flipgate installed in the project's own ``.venv`` (its site-packages first on the path),
    ``flipgate init``, then two audits around ``flipgate baseline``: ``pytest -n 2``, then a bare
    ``pytest`` (no ``-n``), with the tiny random Llama in place of the embedded model (the plan is
    init's)."""
    tmp = tmp_path_factory.mktemp("user")
    proj = tmp / "my-release"
    installed = proj / VENV_SITE
    pip_install(installed, str(source))
    env = _env(installed, tmp)
    before = _git_status()

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=proj, env=env, capture_output=True, text=True, timeout=900)

    def files() -> list[str]:
        return sorted(str(p.relative_to(proj)) for p in proj.rglob("*") if p.is_file())

    init = run(sys.executable, "-m", "flipgate", "init")
    init_again = run(sys.executable, "-m", "flipgate", "init")
    written = {p for p in files() if not p.startswith(".venv/")}
    models = yaml.safe_load((proj / "models.yaml").read_text())
    (model,) = models["models"]
    model.update(id="tiny", source={"path": str(tiny_model_dir)}, max_new_tokens=3)
    model.pop("description")
    (proj / "models.yaml").write_text(yaml.safe_dump(models, sort_keys=False))
    audit = ("pytest", "-n", "2", "-p", "no:randomly", "-v", "--items-per-dataset", "3")
    first = run(sys.executable, "-m", *audit)
    listing = [p for p in files() if not p.startswith(".venv/")]
    results = [
        json.loads(p.read_text()) for p in (proj / "reports/allure-results").glob("*-result.json")
    ]
    promote = run(sys.executable, "-m", "flipgate", "baseline")
    # the second audit is a bare pytest (no -n): the cells run in the controller
    second = run(sys.executable, "-m", "pytest", "-p", "no:randomly", "-v", *audit[-2:])
    return {
        "proj": proj,
        "init": init,
        "init_again": init_again,
        "written": written,
        "first": first,
        "listing": listing,
        "promote": promote,
        "second": second,
        "allure_results": results,
        "repo_status": (before, _git_status()),
        "site": installed,
    }


def test_init_writes_the_layout_and_a_second_init_changes_nothing(project):
    init, again = project["init"], project["init_again"]
    assert init.returncode == 0 and again.returncode == 0, init.stderr + again.stderr
    assert project["written"] == INIT_FILES
    assert all(line.startswith("kept") for line in again.stdout.splitlines()[:7]), again.stdout
    workflow = yaml.safe_load((project["proj"] / ".github/workflows/flipgate.yml").read_text())
    # installed from a folder outside the project: nothing a CI runner can install, and init
    # says so (no flipgate==0.1.0, which no index has)
    assert workflow["env"]["FLIPGATE_PIP_SPEC"] == ""
    assert init.stderr.startswith("flipgate: warning: flipgate was installed from "), init.stderr
    ignored = (project["proj"] / ".gitignore").read_text().splitlines()
    assert {".venv/", "venv/", ".env", "__pycache__/"} <= set(ignored)


def test_test_ids_name_the_suites_not_the_projects_venv(project):
    """Suites collected from the project's own .venv read as pytest names them for a venv
    elsewhere (``order/test_option_order.py::...``), in pytest and in Allure."""
    out = project["first"].stdout
    ids = re.findall(r"^(\S+::\S+) (?:PASSED|FAILED|SKIPPED|ERROR)", out, re.M)
    ids += re.findall(r"\] (?:PASSED|FAILED|SKIPPED|ERROR) (\S+::\S+)", out)
    assert ids and not [i for i in ids if "site-packages" in i or ".venv" in i], ids[:5]
    names = [r["fullName"] for r in project["allure_results"]]
    assert "order.test_option_order#test_option_order" in names, names
    assert not [n for n in names if "site-packages" in n or "venv" in n], names[:5]


def test_a_bare_pytest_without_xdist_runs_the_audit(project):
    """No ``-n``: the tests run in the controller, whose gate ledger pluggy must hash (it was an
    INTERNALERROR, "unhashable type: 'GateLedger'", exit 3)."""
    bare = project["second"]  # the audit after the baseline: no -n
    out = bare.stdout + bare.stderr
    assert bare.returncode in (0, 1), out[-4000:]
    assert "INTERNALERROR" not in out
    assert re.search(r"flipgate: cells: \d+ gated", out), out[-2000:]


def test_the_gate_ledger_is_a_plugin_pluggy_can_hold_in_a_set():
    from flipgate.gate.ledger import GateLedger

    manager = pytest.PytestPluginManager()
    ledger = GateLedger()
    manager.register(ledger, "ledger")
    manager.subset_hook_caller("pytest_runtest_logreport", remove_plugins=[ledger])
    assert GateLedger() != ledger  # two ledgers are two plugins, however alike


def _ran(proc: subprocess.CompletedProcess, test: str) -> dict[str, str]:
    """The outcome of each case of ``test`` that the verbose lines report: xdist's
    (``[gw0] PASSED case``) or one process's (``case PASSED [ 10%]``)."""
    case = r"(\S+::(\w+)\[[^\]]*\])"
    outcome = r"(PASSED|FAILED|SKIPPED|ERROR)"
    found = re.findall(rf"\b{outcome} {case}", proc.stdout)
    found += [(o, c, n) for c, n, o in re.findall(rf"^{case} {outcome}\b", proc.stdout, re.M)]
    return {case: outcome for outcome, case, name in found if name == test}


def test_a_bare_pytest_is_the_audit_of_the_projects_models(project):
    first = project["first"]
    out = first.stdout + first.stderr
    assert first.returncode in (0, 1), out[-4000:]  # a verdict, not "could not run"
    # the suites came from the installed package, with the project's models.yaml
    facet = _ran(first, "test_option_order")
    assert sorted(facet) == [
        f"order/test_option_order.py::test_option_order[tiny-{d}]"
        for d in ("arc_challenge", "commonsense_qa", "mmlu")
    ], out[-3000:]
    assert f"rootdir: {project['proj']}" in first.stdout
    # the shipped thresholds of the suites init's plan does not run: one note per suite
    idle = [line for line in first.stdout.splitlines() if "not applicable, the plan runs" in line]
    assert sorted(line.split("runs no ")[1].split(" suite")[0] for line in idle) == [
        "continuity",
        "decomposition",
        "envelope",
        "judges",
        "regression",
    ], idle
    # no baseline yet: the regression suite says so (the vs: baseline thresholds: not applicable)
    assert _ran(first, "test_regression") == {
        "regression/test_regression.py::test_regression[no-baseline]": "SKIPPED"
    }


def test_the_audit_writes_inside_the_project_and_nowhere_else(project):
    proj, listing = project["proj"], project["listing"]
    before, after = project["repo_status"]
    assert before == after  # this checkout is untouched
    made = {p for p in listing if p not in INIT_FILES}  # (.venv: flipgate, installed there)
    tops = {p.split("/")[0] for p in made}
    # (.pytest_cache: pytest's own cache plugin, which this repository turns off)
    assert tops <= {".flipgate_cache", "fixtures", "grid_cards", "reports", ".pytest_cache"}
    assert {".flipgate_cache", "fixtures", "grid_cards", "reports"} <= tops, sorted(made)
    assert {p.split("/")[1] for p in made if p.startswith("reports/")} == {
        "allure-results",
        "runs",
    }
    cards = sorted(p for p in made if p.startswith("grid_cards/tiny/") and p.endswith(".json"))
    assert "grid_cards/tiny/arc_challenge.json" in cards
    results = list((proj / "reports/allure-results").glob("*-result.json"))
    assert len(results) >= 10  # one per cell, from both xdist workers
    assert any(p.startswith("fixtures/manifests/option_order__") for p in made)
    assert (proj / ".flipgate_cache/responses.sqlite").is_file()


def test_the_second_audit_compares_with_the_promoted_baseline(project):
    promote, second = project["promote"], project["second"]
    assert promote.returncode == 0, promote.stderr
    promoted = json.loads((project["proj"] / "reports/baseline/PROMOTED.json").read_text())
    assert promoted["models"] == ["tiny"] and promoted["trials"] > 0
    out = second.stdout + second.stderr
    assert second.returncode in (0, 1), out[-4000:]
    compared = _ran(second, "test_regression")
    # every order cell of the model (5 facet cells, 5 controls) against its version in the
    # promoted run; the model did not change and its answers are identical, so each case says
    # it would compare the model with itself instead of passing (issue #42)
    assert len(compared) == 10, out[-3000:]
    assert set(compared.values()) == {"SKIPPED"}, compared
    assert "not compared: tiny and its baseline tiny have the same model identity" in out


# ----------------------------------------------------------------------------- init alone


def _init(path: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m flipgate init`` in ``path`` (forked: :mod:`support.forked`)."""
    return run_module("flipgate", ["init", *args], suite_env(), 300, path)


def test_init_keeps_every_existing_file_and_only_adds_what_is_missing(tmp_path):
    (tmp_path / "models.yaml").write_text("# mine\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mine"\n')
    (tmp_path / ".gitignore").write_text("*.pyc\n.flipgate_cache/\n")
    proc = _init(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "models.yaml").read_text() == "# mine\n"
    pyproject = (tmp_path / "pyproject.toml").read_text()
    assert pyproject.startswith('[project]\nname = "mine"\n')
    assert 'testpaths = ["flipgate_suites"]' in pyproject and "--pyargs" in pyproject
    ignored = (tmp_path / ".gitignore").read_text().splitlines()
    assert ignored[:2] == ["*.pyc", ".flipgate_cache/"]
    assert ignored.count(".flipgate_cache/") == 1 and "reports/runs/" in ignored
    state = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    again = _init(tmp_path)
    assert again.returncode == 0
    assert {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()} == state


def test_init_leaves_another_pytest_configuration_alone_and_says_what_it_needs(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -q\n")
    proc = _init(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "pyproject.toml").exists()
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\naddopts = -q\n"
    (line,) = [x for x in proc.stdout.splitlines() if "pytest.ini" in x]
    assert line == (
        "kept    pytest.ini (it sets addopts already; for a bare `pytest` to be the audit, its "
        "[pytest] needs: addopts = --pyargs; testpaths = flipgate_suites; "
        "flipgate_alluredir = reports/allure-results)"
    )


@pytest.mark.parametrize(
    "name, text",
    [
        # pytest 9's native table: a [tool.pytest.ini_options] beside it is "Cannot use both"
        ("pyproject.toml", '[project]\nname = "mine"\n\n[tool.pytest]\nminversion = "9.0"\n'),
        ("pytest.toml", '[pytest]\nminversion = "9.0"\n'),
        ("pytest.ini", "[pytest]\nmarkers =\n    slow: a slow test\n"),
        ("pytest.ini", ""),
        ("tox.ini", "[tox]\nenvlist = py311\n\n[pytest]\nminversion = 8.3\n"),
        ("setup.cfg", "[metadata]\nname = mine\n\n[tool:pytest]\nminversion = 8.3\n"),
    ],
)
def test_init_adds_the_settings_to_the_pytest_table_the_project_uses(name, text, tmp_path):
    (tmp_path / name).write_text(text)
    proc = _init(tmp_path)
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if name in x]
    assert line.startswith("added   addopts, testpaths, flipgate_alluredir to "), line
    assert (tmp_path / "pyproject.toml").exists() is (name == "pyproject.toml")
    added = ("# flipgate: a bare", "addopts =", "testpaths =", "flipgate_alluredir =")
    kept = [x for x in (tmp_path / name).read_text().splitlines() if not x.startswith(added)]
    assert kept == (text.splitlines() or ["[pytest]"])  # every line of the project's kept
    collected = _collect(tmp_path)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    ids = [x for x in collected.stdout.splitlines() if "::" in x]
    assert "order/test_option_order.py::test_option_order[smollm2-135m-instruct-mmlu]" in ids
    again = _init(tmp_path)
    assert f"kept    {name} (its pytest section runs flipgate_suites)" in again.stdout


def test_init_into_a_file_is_one_usage_line(tmp_path):
    (tmp_path / "a-file").write_text("")
    proc = _init(tmp_path, "a-file")
    assert proc.returncode == 4
    assert proc.stderr.strip().splitlines() == ["flipgate: argument DIR 'a-file': not a directory"]


# ----------------------------------------------------------------------- this repository


def test_a_bare_pytest_here_collects_the_suites_not_the_projects_tests():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly"],
        cwd=REPO,
        env=env | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids and all(line.startswith("suites/") for line in ids), ids[:5]


def test_init_names_an_unreadable_pyproject_in_one_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options\n")
    proc = _init(tmp_path)
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("flipgate: ") and "pyproject.toml: not valid TOML" in line


def _collect(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``pytest --collect-only`` started in ``cwd`` (forked: :mod:`support.forked`)."""
    return run_pytest(["--collect-only", "-q", "-p", "no:randomly", *args], suite_env(), 300, cwd)


def test_this_checkouts_suites_audit_the_roster_of_the_folder_pytest_starts_in(tmp_path):
    """pytest on a checkout's suites/ from another folder: the rootdir is the checkout (its
    pyproject.toml), but models.yaml and every output resolve against where pytest started."""
    (tmp_path / "models.yaml").write_text(
        "audit:\n  facets:\n    option_order: {datasets: [arc_challenge]}\n"
        "models:\n  - {id: my-own-model, backend: hf, source: {path: nowhere}, suites: [order]}\n"
    )
    (tmp_path / "thresholds").mkdir()
    (tmp_path / "thresholds/default.yaml").write_text(
        "thresholds:\n  - {metric: flip_rate, max: 0.25}\n"
    )
    proc = _collect(tmp_path, str(REPO / "suites" / "order" / "test_option_order.py"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "test_option_order[my-own-model-arc_challenge]" in proc.stdout


def test_an_unknown_envelope_name_is_one_line_naming_the_shipped_ones(tmp_path):
    proc = _collect(
        tmp_path,
        str(REPO / "suites" / "envelope"),
        *("--models", str(REPO / "models.yaml"), "--thresholds", str(REPO / "thresholds")),
        *("--envelope", "no-such"),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out[-2000:]
    assert (
        "option --envelope 'no-such': not a YAML file path, nor an envelope flipgate ships "
        "(default, sr-practice)" in out
    ), out[-2000:]


def test_the_per_user_cache_follows_flipgate_cache_home(tmp_path, monkeypatch):
    from flipgate.files import user_cache_dir
    from flipgate.items.bigbench import default_cache_dir

    monkeypatch.setenv("FLIPGATE_CACHE_HOME", str(tmp_path / "c"))
    assert user_cache_dir() == tmp_path / "c"
    assert default_cache_dir() == tmp_path / "c" / "bigbench"
    monkeypatch.delenv("FLIPGATE_CACHE_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # platformdirs on Linux
    if sys.platform.startswith("linux"):
        assert user_cache_dir() == tmp_path / "xdg" / "flipgate"


@pytest.mark.parametrize(
    "args,pyargs,expected",
    [
        (["flipgate_suites"], True, set(BUILTIN)),
        (["flipgate_suites.order"], True, {"order"}),
        (["flipgate_suites.order"], False, set()),  # without --pyargs: a missing path
    ],
)
def test_the_cost_guard_prices_the_suites_a_pyargs_run_collects(tmp_path, args, pyargs, expected):
    """``--pyargs flipgate_suites[.x]`` (what init configures) collects the installed suites'
    folders: the cost guard must price exactly those suites (session.collected_suites)."""
    from types import SimpleNamespace

    from flipgate.session import FlipgateSession

    config = SimpleNamespace(
        args=args,
        option=SimpleNamespace(pyargs=pyargs),
        invocation_params=SimpleNamespace(dir=tmp_path),
        rootpath=tmp_path,
        hook=SimpleNamespace(pytest_ignore_collect=lambda **kw: None),
    )
    names = {s.name for s in FlipgateSession(config, "run").collected_suites()}
    assert names & set(BUILTIN) == expected  # (an installed suite of another package aside)


@pytest.mark.slow
def test_a_projects_own_tests_get_no_flipgate_folders(tmp_path):
    """flipgate's plugin is active in every pytest run of an environment it is installed in. A
    project's own tests (no module names a suite) leave none of its folders or its response cache
    behind; a run that reaches a suite's module prepares them before anything is collected."""
    (tmp_path / "test_mine.py").write_text("def test_mine():\n    assert True\n")
    proc = run_pytest(["-q", "-p", "no:cacheprovider"], suite_env(), 120, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert {p.name for p in tmp_path.iterdir()} - {"__pycache__"} == {"test_mine.py"}

    suite_module = (
        'SUITE = "order"\nPART = "option_order"\n\n\ndef test_o(flipgate_cell):\n    pass\n'
    )
    (tmp_path / "test_order.py").write_text(suite_module)
    proc = run_pytest(["-q", "-p", "no:cacheprovider"], suite_env(), 120, tmp_path)
    assert "models.yaml" in proc.stdout, proc.stdout[-2000:]  # no plan here: a collection error
    for folder in (".flipgate_cache", "fixtures/manifests", "grid_cards", "reports/runs"):
        assert (tmp_path / folder).is_dir(), folder
    assert (tmp_path / ".flipgate_cache" / "responses.sqlite").is_file()


@pytest.mark.parametrize("option", ["--models", "--thresholds", "--baseline", "--runs-dir"])
def test_a_path_option_given_apart_keeps_the_rootdir_or_says_to_use_equals(tmp_path, option):
    """``--models /elsewhere/models.yaml`` (space, not ``=``): pytest reads the value as a test
    path before it knows the option and would move its rootdir out of the project; flipgate stops
    with one line saying to write ``--models=PATH`` (issue #60). With ``=``, or a path inside the
    project, or a value that is no path, the audit collects as usual."""
    project, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    elsewhere.mkdir()
    project.mkdir()
    assert _init(project).returncode == 0
    shutil.copy(project / "models.yaml", elsewhere / "models.yaml")
    shutil.copytree(project / "thresholds", elsewhere / "thresholds")
    value = str(
        elsewhere / {"--models": "models.yaml", "--thresholds": "thresholds"}.get(option, "")
    )
    apart = _collect(project, option, value)
    assert apart.returncode == 4, apart.stdout[-2000:]
    (line,) = [x for x in apart.stderr.splitlines() if x.strip()]
    assert f"write {option}={value}" in line and "rootdir" in line, line
    together = _collect(project, f"{option}={value}")
    assert "rootdir" not in together.stdout + together.stderr
    if option != "--baseline":  # (a folder without a trials store is refused as a baseline)
        assert together.returncode == 0 and "test_option_order" in together.stdout
    for args in (["--budget", "5"], ["--models", "models.yaml"]) if option == "--models" else ():
        proc = _collect(project, *args)
        assert proc.returncode == 0 and "test_option_order" in proc.stdout, proc.stderr[-2000:]
