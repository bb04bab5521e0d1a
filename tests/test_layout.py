"""The project's own tests mirror the package: ``tests/unit/<package>/`` tests
``flipgate/<package>/`` in process (``tests/unit/`` itself the top-level modules);
``tests/integration/`` runs flipgate as a user does (pytest and CLI subprocesses, real servers,
golden cards). They share helpers through ``tests/support/`` and fixtures through
``tests/conftest.py``: a test module imports neither another test module nor ``conftest``
(pytest's default import mode loads every ``conftest.py`` as the one module ``conftest``, so which
one such an import gets depends on the order of loading)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from support.paths import REPO

TESTS = REPO / "tests"
LAYERS = ("unit", "integration")


def imported_modules(path) -> set[str]:
    """The top-level module of every import in ``path``, at any depth (function-level too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def all_test_modules() -> list:
    """Every test module under tests/, the ninth suite's own excepted."""
    return sorted(p for p in TESTS.rglob("test_*.py") if "ninth_suite" not in p.parts)


def test_no_test_module_imports_another_or_conftest():
    modules = {p.stem for p in all_test_modules()} | {"conftest"}
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_modules(path) & modules)
        for path in [*all_test_modules(), *(TESTS / "support").rglob("*.py")]
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_a_function_level_import(tmp_path):
    planted = tmp_path / "test_x.py"
    planted.write_text("def test_a():\n    from test_end_to_end import run_suite\n")
    assert "test_end_to_end" in imported_modules(planted)


def test_every_test_module_sits_in_a_layer_and_unit_folders_name_packages():
    placed = {}
    for path in all_test_modules():
        parts = path.relative_to(TESTS).parts
        placed[str(path.relative_to(TESTS))] = parts[0] in LAYERS or parts == ("test_layout.py",)
    assert [p for p, ok in placed.items() if not ok] == []
    folders = {p.parent for p in (TESTS / "unit").rglob("test_*.py")} - {TESTS / "unit"}
    mirrored = {f: REPO / "flipgate" / f.relative_to(TESTS / "unit") for f in folders}
    unmirrored = [str(f) for f, pkg in mirrored.items() if not (pkg / "__init__.py").is_file()]
    assert sorted(unmirrored) == []
    assert (TESTS / "integration").is_dir()


def test_test_module_names_are_unique():
    """pytest's default import mode imports a test module by its file name alone."""
    stems = [p.stem for p in all_test_modules()]
    assert sorted({s for s in stems if stems.count(s) > 1}) == []


@pytest.mark.slow
def test_tests_sharing_a_module_fixture_run_on_one_xdist_worker(tmp_path):
    """Under ``-n 2 --dist loadgroup`` (``make test``), the tests of a module that share a
    module-scoped fixture run on one worker, which builds the fixture once; the others spread."""
    (tmp_path / "conftest.py").write_text(
        "from support.xdist_groups import pytest_collection_modifyitems  # noqa: F401\n"
    )
    (tmp_path / "test_probe.py").write_text(
        "import os, pytest\n"
        "from pathlib import Path\n"
        "@pytest.fixture(scope='module')\n"
        "def shared():\n"
        "    return 1\n"
        "def record(name):\n"
        "    Path(__file__).with_name(name).write_text(os.environ['PYTEST_XDIST_WORKER'])\n"
        + "".join(f"def test_shared_{i}(shared):\n    record('shared{i}')\n" for i in range(4))
        + "".join(f"def test_alone_{i}():\n    record('alone{i}')\n" for i in range(4))
    )
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path),
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:flipgate",
            "-q",
            "--rootdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers = {p.name: p.read_text() for p in tmp_path.glob("[sa][hl]*[0-9]")}
    shared = {workers[f"shared{i}"] for i in range(4)}
    assert len(shared) == 1, workers


@pytest.mark.slow
def test_a_forked_suite_run_is_a_process_of_its_own(tmp_path):
    """support.forked: the run's environment, directory, path, streams, status and exit handlers,
    with the heavy libraries already imported."""
    from support.forked import run_module, run_pytest
    from support.suite_runs import suite_env

    (tmp_path / "test_probe.py").write_text(
        "import atexit, os, sys\n"
        "def test_probe():\n"
        "    print('cwd', os.getcwd(), 'probe', os.environ.get('PROBE'), 'path0', sys.path[0])\n"
        "    print('preloaded', 'torch' in sys.modules, 'flipgate' in sys.modules)\n"
        "    atexit.register(lambda: open('atexit-ran', 'w').close())\n"
        "    sys.stderr.write('to stderr\\n')\n"
        "    assert False\n"
    )
    proc = run_pytest(
        ["-s", "-q", "-p", "no:flipgate", "-p", "no:randomly", "-p", "no:cacheprovider"],
        suite_env(PROBE="yes"),
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"cwd {tmp_path} probe yes path0 {tmp_path}" in proc.stdout
    assert "preloaded True False" in proc.stdout  # flipgate and pytest's plugins load fresh
    assert "to stderr" in proc.stdout + proc.stderr and "1 failed" in proc.stdout
    assert (tmp_path / "atexit-ran").exists()
    # python -m of another module: its file as argv[0], the arguments, its SystemExit the status
    (tmp_path / "probe_cli.py").write_text(
        "import sys\n"
        "print('argv', sys.argv[0].endswith('probe_cli.py'), sys.argv[1:], __name__)\n"
        "sys.exit(3)\n"
    )
    proc = run_module("probe_cli", ["a", "b"], suite_env(), timeout=60, cwd=tmp_path)
    assert proc.returncode == 3 and proc.stdout == "argv True ['a', 'b'] __main__\n", proc
    assert proc.args[1:] == ["-m", "probe_cli", "a", "b"]
