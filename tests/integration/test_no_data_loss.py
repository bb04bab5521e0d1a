"""Nothing a user configures is deleted: a bare ``pytest`` empties its Allure results folder
(``flipgate_alluredir``) only when flipgate created and marked it, and then only of Allure's own
files (flipgate/results_dir.py). Each case is a real bare ``pytest -k nothing`` in a project
``flipgate init`` wrote, in a subprocess."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.forked import run_module, run_pytest
from support.suite_runs import suite_env

from flipgate.exitcodes import NO_TESTS, USAGE_ERROR
from flipgate.results_dir import MARKER

#: files Allure and flipgate write into a results folder (allure_commons.model2's patterns)
ALLURE_FILES = (
    "0b7e2a52-8f0e-4b5e-9c51-3c1d2e4f5a6b-result.json",
    "1c8f3b63-9a1f-4c6f-8d62-4d2e3f5a6b7c-container.json",
    "2d9a4c74-0b2a-4d7a-9e73-5e3f4a6b7c8d-attachment.csv",
    "environment.properties",
)


#: what a user keeps in a project: notes, a promoted baseline and an earlier run
USER_FILES = {
    "notes.md": "my notes\n",
    "reports/baseline/trials.sqlite": "baseline store\n",
    "reports/baseline/PROMOTED.json": "{}\n",
    "reports/runs/20250101T000000Z-abc123/trials.sqlite": "older run\n",
}


def _add(project: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(content)


def _project(tmp_path: Path, alluredir: str) -> Path:
    """``flipgate init`` in an empty folder, its ``flipgate_alluredir`` set to ``alluredir``."""
    project = tmp_path / "proj"
    project.mkdir()
    init = run_module("flipgate", ["init"], suite_env(), 300, project)
    assert init.returncode == 0, init.stderr
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    assert 'flipgate_alluredir = "reports/allure-results"' in text
    pyproject.write_text(text.replace('"reports/allure-results"', f'"{alluredir}"'))
    return project


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _bare_pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    """``pytest -k nothing`` with no test path: the audit, collecting and running nothing."""
    return run_pytest(["-k", "nothing", "-p", "no:cacheprovider", *args], suite_env(), 300, project)


@pytest.mark.slow
@pytest.mark.parametrize("alluredir", [".", "..", "reports"])
def test_a_folder_flipgate_did_not_make_is_refused_and_kept(tmp_path, alluredir):
    """``"."`` (the project), ``".."`` (holds it) and ``"reports"`` (the user's baseline and
    runs, no marker): one usage-error line naming pyproject.toml's setting; every file survives."""
    project = _project(tmp_path, alluredir)
    _add(project, USER_FILES)
    before = _tree(tmp_path)
    assert {"proj/models.yaml", "proj/pyproject.toml", "proj/.gitignore"} <= set(before)
    proc = _bare_pytest(project)
    assert proc.returncode == USAGE_ERROR, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "flipgate:" in line]
    assert len(lines) == 1, proc.stderr
    assert f"pyproject.toml's flipgate_alluredir = '{alluredir}'" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert _tree(tmp_path) == before


@pytest.mark.slow
def test_a_marked_folder_loses_only_allure_files(tmp_path):
    """``"reports"`` that flipgate created: the first bare run marks it; the next one deletes the
    Allure files in it and keeps reports/baseline, reports/runs and anything else."""
    project = _project(tmp_path, "reports")  # no reports/ yet: flipgate creates and marks it
    proc = _bare_pytest(project)
    assert proc.returncode == NO_TESTS, proc.stdout + proc.stderr
    assert (project / "reports" / MARKER).is_file()
    _add(project, USER_FILES)
    _add(project, {f"reports/{name}": "old result\n" for name in ALLURE_FILES})
    _add(project, {"reports/categories.json": "[]\n"})  # the user's Allure config
    before = _tree(project)
    proc = _bare_pytest(project, "--baseline", "none")  # USER_FILES' stores are not SQLite
    assert proc.returncode == NO_TESTS, proc.stdout + proc.stderr
    after = _tree(project)
    assert set(before) - set(after) == {f"reports/{name}" for name in ALLURE_FILES}
    assert all(after[name] == before[name] for name in set(after) & set(before))
    assert {"reports/baseline/trials.sqlite", "reports/categories.json", "notes.md"} <= set(after)


@pytest.mark.slow
def test_alluredir_naming_a_file_is_one_usage_line(tmp_path):
    project = _project(tmp_path, "reports/allure-results")
    (project / "results.txt").write_text("not a folder\n")
    proc = _bare_pytest(project, "--alluredir", "results.txt")
    assert proc.returncode == USAGE_ERROR, proc.stdout + proc.stderr
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
    assert "flipgate: --alluredir 'results.txt':" in proc.stderr
    assert "is a file, not a folder" in proc.stderr
    assert (project / "results.txt").read_text() == "not a folder\n"


def test_an_unmarked_folder_of_allure_files_only_is_adopted(tmp_path):
    """A results folder from before the marker existed (Allure's files and nothing else) is
    emptied and marked; one more file of any other name and it is refused, untouched."""
    from flipgate import FlipgateError
    from flipgate.results_dir import prepare

    project = tmp_path / "proj"
    results = project / "reports" / "allure-results"
    _add(project, {f"reports/allure-results/{name}": "old\n" for name in ALLURE_FILES})
    prepare(results, project, "setting")
    assert sorted(p.name for p in results.iterdir()) == [MARKER]

    other = project / "other"
    _add(project, {f"other/{name}": "old\n" for name in ALLURE_FILES} | {"other/keep.txt": "x"})
    before = _tree(other)
    with pytest.raises(FlipgateError, match="holds files flipgate did not write"):
        prepare(other, project, "setting")
    assert _tree(other) == before


# ------------------------------------ init writes only its own files, never through a link (#60)


def _init(project: Path, capsys) -> tuple[int, str]:
    from flipgate.init import init_main

    status = init_main([str(project), "--pip-spec", "flipgate==0.1.0"])
    return status, capsys.readouterr().err


@pytest.mark.parametrize(
    "link, target",
    [
        (".gitignore", "outside.txt"),
        ("pyproject.toml", "outside.txt"),
        ("setup.cfg", "outside.txt"),
        ("thresholds", "outside-dir"),  # thresholds/default.yaml would be written through it
        ("models.yaml", "missing.yaml"),  # a dangling link out of the project
    ],
)
def test_init_writes_nothing_through_a_link_out_of_the_project(tmp_path, capsys, link, target):
    """A file (or folder) init would write or update that is a link out of the project: one line
    naming it, and nothing written anywhere (the file outside keeps its bytes)."""
    project = tmp_path / "proj"
    project.mkdir()
    (tmp_path / "outside.txt").write_text("[tool:pytest]\nkeep me\n")
    (tmp_path / "outside-dir").mkdir()
    (project / link).symlink_to(tmp_path / target)
    before = _tree(tmp_path)
    status, err = _init(project, capsys)
    assert status == USAGE_ERROR, err
    assert err.count("\n") == 1 and link in err and "link" in err, err
    assert _tree(tmp_path) == before
    assert (project / link).is_symlink()


def test_init_follows_a_link_inside_the_project(tmp_path, capsys):
    """.gitignore as a link to a file in the project: the entries go into that file, atomically,
    and .gitignore stays a link."""
    project = tmp_path / "proj"
    (project / "config").mkdir(parents=True)
    (project / "config" / "gitignore").write_text("build/\n")
    (project / ".gitignore").symlink_to("config/gitignore")
    status, err = _init(project, capsys)
    assert status == 0, err
    assert (project / ".gitignore").is_symlink()
    text = (project / "config" / "gitignore").read_text()
    assert text.startswith("build/\n") and "reports/" in text


@pytest.mark.parametrize("name", ["pyproject.toml", "setup.cfg", "pytest.ini", ".gitignore"])
def test_init_with_a_file_that_is_not_utf8_is_one_line(tmp_path, capsys, name):
    """A pytest configuration or .gitignore in another encoding: one line naming the file and the
    byte, no traceback, and nothing written."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / name).write_bytes(b"[tool:pytest]\n# caf\xe9\n")
    before = _tree(project)
    status, err = _init(project, capsys)
    assert status == USAGE_ERROR, err
    assert err.count("\n") == 1 and name in err and "not UTF-8" in err, err
    assert _tree(project) == before
