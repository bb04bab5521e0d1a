"""The suite API moved to flipgate.suite.api; a suite written against the former path
``flipgate.suite_api`` gets the same module, so its classes are the registry's own."""

import subprocess
import sys

import pytest

import flipgate.suite.api as api


def test_the_former_path_is_the_same_module():
    import flipgate.suite_api as former
    from flipgate.suite_api import Suite

    assert former is api
    assert Suite is api.Suite


@pytest.mark.slow  # a fresh interpreter importing flipgate: ~3 s
def test_the_former_path_imported_first_in_a_fresh_process():
    code = (
        "from flipgate.suite_api import Suite, SuiteCell\n"
        "import flipgate.suite.api as api\n"
        "assert Suite is api.Suite and SuiteCell is api.SuiteCell\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
