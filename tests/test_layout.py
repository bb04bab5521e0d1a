"""The project's own tests share helpers through ``tests/support/`` and fixtures through
``tests/conftest.py``: a test module never imports another test module."""

from __future__ import annotations

import ast

from conftest import REPO


def imported_modules(path) -> set[str]:
    """The top-level module of every import in ``path``, at any depth (function-level too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_no_test_module_imports_another():
    tests = REPO / "tests"
    modules = {p.stem for p in tests.rglob("test_*.py")}
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_modules(path) & modules)
        for path in [*tests.rglob("test_*.py"), *(tests / "support").rglob("*.py")]
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_a_function_level_import(tmp_path):
    planted = tmp_path / "test_x.py"
    planted.write_text("def test_a():\n    from test_end_to_end import run_suite\n")
    assert "test_end_to_end" in imported_modules(planted)
