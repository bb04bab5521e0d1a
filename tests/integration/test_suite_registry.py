"""One suite, one object (flipgate/suite/api.py, flipgate/registry.py): flipgate's seven suites
satisfy the Suite protocol, a broken or clashing entry point is one line naming it, and a ninth
suite that lives outside flipgate (tests/ninth_suite/flipgate_first_label.py), installed through
the ``flipgate.suites`` entry point into a project of its own, is parametrised, gated, carded,
attached to Allure, planned for the progress display and priced by the cost guard, with no
flipgate file naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.gating import GATING, one_model
from support.paths import REPO, write
from support.suite_runs import models_yaml

from flipgate import FlipgateError, registry
from flipgate.exitcodes import GATE_FAILED, GATE_PASSED, USAGE_ERROR
from flipgate.store import TrialStore
from flipgate.suite.api import REQUIRED, Suite

NINTH = REPO / "tests" / "ninth_suite"


def test_flipgates_suites_satisfy_the_protocol_with_one_name_each():
    suites = registry.suites()
    assert [s.name for s in suites][:7] == list(registry.BUILTIN)
    for suite in suites:
        assert isinstance(suite, Suite), suite.name
        # flipgate's own test folders are in the package it ships, flipgate_suites (suites/ here)
        assert suite.test_dirs and all(
            d.startswith("flipgate_suites/") and (REPO / "suites" / d.partition("/")[2]).is_dir()
            for d in suite.test_dirs
        ), suite.name
    # a suite defines three members itself; every other has a default in the base class
    assert REQUIRED == ("name", "cases", "measure")


def test_a_suite_that_lacks_a_required_member_is_one_line_naming_it(entry_points):
    class Nameless(Suite):
        def measure(self, cell, param):
            raise AssertionError

    entry_points.append(_EntryPoint("bad", Nameless()))
    with pytest.raises(FlipgateError) as exc:
        registry.suites()
    assert str(exc.value) == (
        "entry point 'bad' of some-dist (group flipgate.suites): not a flipgate suite: Nameless "
        "does not define name, cases (flipgate.suite.api.REQUIRED)"
    )


def test_each_suite_module_in_suites_names_a_registered_suite():
    named = {}
    for path in sorted((REPO / "suites").rglob("test_*.py")):
        text = path.read_text()
        line = next(x for x in text.splitlines() if x.startswith("SUITE = "))
        named[path.relative_to(REPO / "suites").parts[0]] = line.split('"')[1]
        assert "flipgate_cell" in text, path
    assert set(named.values()) == set(registry.BUILTIN)
    for suite in registry.suites():
        for folder in suite.test_dirs:
            assert named[Path(folder).name] == suite.name


class _EntryPoint:
    def __init__(self, name, obj):
        self.name, self.value, self._obj = name, f"pkg:{name}", obj
        self.dist = type("Dist", (), {"name": "some-dist"})()

    def load(self):
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


@pytest.fixture
def entry_points(monkeypatch):
    found: list = []
    monkeypatch.setattr(registry, "entry_points", lambda group: list(found))
    registry.reset()
    yield found
    registry.reset()


def _first_label():
    sys.path.insert(0, str(NINTH))
    try:
        from flipgate_first_label import SUITE
    finally:
        sys.path.remove(str(NINTH))
    return SUITE


def test_a_registered_suite_joins_flipgates_own(entry_points):
    entry_points.append(_EntryPoint("first_label", _first_label()))
    assert registry.names()[-1] == "first_label"
    assert registry.get("first_label").metrics[0].name == "first_label_rate"
    assert [s.name for s in registry.external()] == ["first_label"]


@pytest.mark.parametrize(
    "obj, message",
    [
        (object(), "object is not a subclass of flipgate.suite.api.Suite"),
        (ImportError("no module named pkg"), "cannot load 'pkg:bad': no module named pkg"),
    ],
    ids=["not-a-suite", "import-error"],
)
def test_a_broken_entry_point_is_one_line_naming_it(entry_points, obj, message):
    entry_points.append(_EntryPoint("bad", obj))
    with pytest.raises(FlipgateError) as exc:
        registry.suites()
    text = str(exc.value)
    assert "entry point 'bad' of some-dist (group flipgate.suites)" in text and message in text
    assert "\n" not in text


def test_a_suite_may_not_take_a_name_already_registered(entry_points):
    clash = _first_label()
    clash = type("Clash", (type(clash),), {"name": "order"})()
    entry_points.append(_EntryPoint("order", clash))
    with pytest.raises(FlipgateError, match="suite 'order' is already registered"):
        registry.suites()


@pytest.mark.parametrize(
    "members, message",
    [
        (
            {"name": "readouts"},
            "field name: suite 'readouts' is already registered (by "
            "flipgate.decomposition.suite:SUITE, as a former name of 'decomposition')",
        ),
        (
            {"former_names": ("readouts",)},
            "field former_names: suite 'readouts' is already registered (by "
            "flipgate.decomposition.suite:SUITE, as a former name of 'decomposition')",
        ),
        (
            {"former_names": ("judges",)},
            "field former_names: suite 'judges' is already registered (by "
            "flipgate.judges.suite:SUITE)",
        ),
    ],
    ids=["a-former-name-as-its-name", "another-suites-former-name", "another-suites-name"],
)
def test_a_suite_may_not_take_a_name_another_suite_had(entry_points, members, message):
    clash = type("Clash", (type(_first_label()),), members)()
    entry_points.append(_EntryPoint("clash", clash))
    with pytest.raises(FlipgateError) as exc:
        registry.suites()
    assert str(exc.value) == f"entry point 'clash' of some-dist (group flipgate.suites): {message}"


@pytest.mark.parametrize(
    "members, field",
    [({"name": "First Label"}, "name"), ({"former_names": ("2nd",)}, "former_names")],
)
def test_a_suite_name_or_former_name_that_is_no_name_is_one_line(entry_points, members, field):
    bad = type("Bad", (type(_first_label()),), members)()
    entry_points.append(_EntryPoint("bad", bad))
    with pytest.raises(FlipgateError, match=f"field {field}: a suite name is 1-32 of a-z"):
        registry.suites()


def test_one_name_per_suite_with_the_former_names_still_read():
    """A built-in suite's name is its folder in suites/, its test function (the order suite's
    modules are its facets and controls), its cells' facet: and its audit.<key>; the two names
    that changed are still read: suites: [readouts] and facet: judge."""
    for suite in registry.suites()[: len(registry.BUILTIN)]:
        assert suite.test_dirs == (f"flipgate_suites/{suite.name}",)
        assert suite.facet in (suite.name, None) and suite.config_key in (suite.name, None)
        if suite.name != "order":
            [module] = (REPO / "suites" / suite.name).glob("test_*.py")
            assert module.name == f"test_{suite.name}.py"
            assert f"\ndef test_{suite.name}(flipgate_cell):" in module.read_text()
    assert registry.get("readouts") is registry.get("decomposition")
    assert registry.get("judge") is registry.get("judges")


# ------------------------------------------------------------- a ninth suite, in a user's project
def _project(tmp: Path, tiny_model_dir: Path, thresholds: str) -> Path:
    """A project of its own (pytest.ini, models.yaml, thresholds/, suites/), with the ninth suite
    installed as a distribution whose entry point names it."""
    project = tmp / "project"
    write(project / "pytest.ini", "[pytest]\n")
    models = models_yaml(project / "models.yaml", one_model(tiny_model_dir), "[arc_challenge]")
    text = models.read_text().replace(
        "models:\n", "  first_label: {datasets: [arc_challenge]}\nmodels:\n", 1
    )
    models.write_text(
        text.replace("max_new_tokens: 3", "max_new_tokens: 3, suites: [order, first_label]")
    )
    write(project / "thresholds" / "default.yaml", thresholds)
    write(
        project / "suites" / "order" / "test_option_order.py",
        (REPO / "suites" / "order" / "test_option_order.py").read_text(),
    )
    write(
        project / "suites" / "first_label" / "test_first_label.py",
        (NINTH / "test_first_label.py.txt").read_text(),
    )
    dist = tmp / "site" / "flipgate_first_label-0.1.dist-info"
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: flipgate-first-label\nVersion: 0.1\n")
    write(
        dist / "entry_points.txt", "[flipgate.suites]\nfirst_label = flipgate_first_label:SUITE\n"
    )
    return project


def _run(project: Path, *args: str) -> tuple[subprocess.CompletedProcess, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env |= {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(project.parent / "site"), str(NINTH)]),
    }
    cmd = [sys.executable, "-m", "pytest", "suites", "-p", "no:randomly", "-rA", *args]
    proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env, timeout=600)
    return proc, proc.stdout + proc.stderr


FIRST_LABEL = "  - {metric: first_label_rate, facet: first_label, %s, rule: point}\n"


@pytest.mark.slow
def test_a_ninth_suite_from_an_entry_point_runs_end_to_end(tiny_model_dir, tmp_path):
    project = _project(tmp_path, tiny_model_dir, GATING + FIRST_LABEL % "max: 1.0")
    proc, out = _run(project, "--items-per-dataset", "2", "--alluredir", "allure", "--budget", "1")
    assert proc.returncode == GATE_PASSED, out[-4000:]
    # parametrised from its cases, and gated: its cell counts among the gated ones
    assert (
        "PASSED suites/first_label/test_first_label.py::test_first_label[tiny-arc_challenge]" in out
    )
    assert "flipgate: cells: 2 gated" in out, out[-3000:]  # option_order and first_label
    assert "flipgate: first_label: 1 cell(s) recorded" in out
    run = next((project / "reports" / "runs").iterdir())
    store = TrialStore.read_only(run / "trials.sqlite")
    # in the progress plan: N items x K orderings
    planned = store.conn.execute(
        "SELECT model_id, dataset, trials FROM planned WHERE cell = 'first_label'"
    ).fetchall()
    assert planned == [("tiny", "arc_challenge", 12)]
    # in the cost projection the guard wrote (a local model: calls counted, nothing to pay)
    projection = json.loads((run / "cost_projection.json").read_text())
    mine = [m for m in projection["models"] if m["suite"] == "first_label"]
    assert [(m["model_id"], m["n_calls"], m["usd"]) for m in mine] == [("tiny", 12, 0.0)]
    # its verdict and its section on the model's card, Markdown included
    card = json.loads((project / "grid_cards" / "tiny" / "arc_challenge.json").read_text())
    section = card["suites"]["first_label"]
    assert section["n_answers"] == 12 and 0.0 <= section["rate"] <= 1.0
    assert any(v["threshold"].startswith("first_label_rate") for v in card["thresholds"])
    assert "## First-label preference" in (project / "grid_cards/tiny/arc_challenge.md").read_text()
    # its attachment in the Allure results
    results = [json.loads(p.read_text()) for p in (project / "allure").glob("*-result.json")]
    mine = [r for r in results if r["name"] == "test_first_label[tiny-arc_challenge]"]
    assert mine and mine[0]["status"] == "passed"
    assert [a["name"] for a in mine[0]["attachments"]] == ["first_label.json"]

    # the same suite fails the run when its threshold does
    bound = "min: 1.0" if section["rate"] < 1.0 else "max: 0.5"
    write(project / "thresholds" / "default.yaml", GATING + FIRST_LABEL % bound)
    proc, out = _run(project, "--items-per-dataset", "2")
    assert proc.returncode == GATE_FAILED, out[-4000:]
    assert "FAILED suites/first_label/test_first_label.py::test_first_label" in out


@pytest.mark.slow
def test_a_threshold_naming_a_metric_the_suite_lacks_is_a_usage_error(tiny_model_dir, tmp_path):
    bad = GATING + "  - {metric: flip_rate, facet: first_label, max: 0.5, rule: point}\n"
    project = _project(tmp_path, tiny_model_dir, bad)
    proc, out = _run(project, "--items-per-dataset", "2", "--collect-only")
    assert proc.returncode == USAGE_ERROR, out[-3000:]
    assert (
        "field thresholds[3]: first_label metrics (first_label_rate) go with facet: first_label "
        "and only they do (value: metric 'flip_rate', facet 'first_label')"
    ) in out
    assert "Traceback" not in out


def _with_first_label(entry_points, tmp_path: Path) -> Path:
    """The ninth suite registered, and a models.yaml whose model lists it (no settings yet)."""
    entry_points.append(_EntryPoint("first_label", _first_label()))
    registry.suites()
    return models_yaml(
        tmp_path / "models.yaml",
        "  - {id: m, backend: hf, source: {path: x}, suites: [order, first_label]}\n",
        "[arc_challenge]",
    )


@pytest.mark.parametrize(
    "section, message",
    [
        ("first_label: {datasets: []}", "field audit.first_label.datasets: [] should be non-empty"),
        ("first_label: {datasets: [mmlu]}", "field audit.first_label.datasets[0]: not under"),
        ("first_label: {sets: [arc_challenge]}", "field audit.first_label"),
    ],
    ids=["empty", "undeclared-dataset", "unknown-key"],
)
def test_a_registered_suites_settings_are_checked_like_flipgates(
    entry_points, tmp_path, section, message
):
    from flipgate.config import load_models

    path = _with_first_label(entry_points, tmp_path)
    path.write_text(path.read_text().replace("models:\n", f"  {section}\nmodels:\n", 1))
    with pytest.raises(FlipgateError) as exc:
        load_models(path)
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value), str(exc.value)


def test_a_model_listing_a_registered_suite_needs_its_settings(entry_points, tmp_path):
    from flipgate.config import load_models

    path = _with_first_label(entry_points, tmp_path)
    with pytest.raises(FlipgateError, match="suite 'first_label' needs audit.first_label"):
        load_models(path)
    # without the suite registered, its name is not a suite at all
    registry.reset()
    entry_points.clear()
    with pytest.raises(FlipgateError, match=r"field models\[0\].suites\[1\]"):
        load_models(path)


def test_a_broken_entry_point_stops_a_command_with_one_line(entry_points, capsys):
    from flipgate.__main__ import main

    entry_points.append(_EntryPoint("bad", object()))
    assert main(["compare", "a", "b"]) == USAGE_ERROR
    err = capsys.readouterr().err
    assert err.startswith("flipgate: entry point 'bad' of some-dist") and err.count("\n") == 1


def test_flipgates_own_suites_describe_and_parse_their_settings_themselves():
    """models.yaml's shipped schema names no suite's ``audit.<key>``: each opt-in suite brings
    its fragment (schema.json in its package) and its parser (plan.py), like an external one."""
    from flipgate.config import SCHEMAS, _schema, load_models

    shipped = json.loads((SCHEMAS / "models.schema.json").read_text())["properties"]["audit"]
    merged = _schema("models")["properties"]["audit"]["properties"]
    cfg = load_models(REPO / "models.yaml")
    keyed = [s for s in registry.suites() if s.config_key is not None]
    assert {s.name for s in keyed} == {"odi", "decomposition", "judges", "continuity"}
    for suite in keyed:
        assert suite.config_key not in shipped["properties"]
        assert merged[suite.config_key] == suite.schema
        plan = cfg.plans[suite.name]
        if suite.name != "odi":  # the ODI fit's settings are a plain mapping
            assert type(plan).__module__ == f"{type(suite).__module__.rpartition('.')[0]}.plan"
