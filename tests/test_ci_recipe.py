"""docs/ci.md: the GitHub Actions recipe parses, caches, keeps the exit statuses and uploads with
if: always()."""

import re
import shlex
from pathlib import Path

import pytest
import yaml

from flipgate import exitcodes

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs/ci.md"
PYTEST_OWN = {
    "--junitxml"
}  # pytest's own options; flipgate's and allure's are read in flipgate/plugin.py


@pytest.fixture(scope="module")
def steps():
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "docs/ci.md should hold exactly one ```yaml block"
    workflow = yaml.safe_load(blocks[0])
    (job,) = workflow["jobs"].values()
    return job["steps"]


def _uses(step, action):
    return step.get("uses", "").split("@")[0] == action


def _audit_command(steps):
    (run,) = [s["run"] for s in steps if "scripts/audit" in s.get("run", "")]
    (line,) = [line for line in run.splitlines() if "scripts/audit" in line]
    return line


def test_workflow_sets_up_python_node_and_caches(steps):
    python = [s for s in steps if _uses(s, "actions/setup-python")]
    assert python and str(python[0]["with"]["python-version"]) == "3.11"
    assert any(_uses(s, "actions/setup-node") for s in steps)
    assert any(_uses(s, "actions/checkout") for s in steps)
    caches = [s["with"] for s in steps if _uses(s, "actions/cache")]
    assert any(
        line.strip().startswith(".flipgate_cache")
        for c in caches
        for line in c["path"].splitlines()
    )
    assert any("responses.sqlite" in c["path"] for c in caches)
    assert all("models.yaml" in c["key"] and "thresholds/**" in c["key"] for c in caches)


def test_workflow_runs_the_audit_with_junit_and_uploads_always(steps):
    assert "--junitxml" in _audit_command(steps)
    uploads = [s for s in steps if _uses(s, "actions/upload-artifact")]
    for wanted in ("grid_cards", "allure-report"):
        (step,) = [s for s in uploads if wanted in s["with"]["path"]]
        assert step.get("if") == "always()", step


def test_workflow_flags_exist(steps):
    """The workflow's flags plus those scripts/audit adds: each is pytest's own or read in
    flipgate/plugin.py or flipgate/session.py."""
    plugin = (REPO / "flipgate/plugin.py").read_text() + (REPO / "flipgate/session.py").read_text()
    script = (REPO / "scripts/audit").read_text()
    (pytest_line,) = [line for line in script.splitlines() if "-m pytest" in line]
    flags = {
        t.split("=")[0]
        for c in (_audit_command(steps), pytest_line)
        for t in shlex.split(c)
        if t.startswith("--")
    }
    assert {"--items-per-dataset", "--alluredir", "--junitxml"} <= flags
    for flag in flags - PYTEST_OWN:
        assert f'"{flag}"' in plugin, f"{flag} is not an option flipgate's plugin knows"


def test_every_exit_status_is_documented():
    codes = {
        name: value
        for name, value in vars(exitcodes).items()
        if name.isupper() and isinstance(value, int)
    }
    assert set(codes.values()) == set(exitcodes.MEANING) == set(range(7))
    for doc in (DOC, REPO / "README.md"):
        text = doc.read_text()
        for name, value in codes.items():
            assert re.search(rf"^\| {value} \| `{name}` \|", text, re.M), (
                f"{doc.name}: exit status {value} ({name})"
            )


def test_audit_script_is_executable_and_make_audit_calls_it():
    script = REPO / "scripts/audit"
    assert script.stat().st_mode & 0o111
    assert "./scripts/audit" in (REPO / "Makefile").read_text()
    assert "./scripts/audit" in (REPO / "README.md").read_text().split("## How it works")[0]
