"""A card names where a model came from without naming a folder of the auditing machine
(flipgate/backends/source.py)."""

from __future__ import annotations

from importlib import metadata

import pytest

from flipgate.backends.source import OUTSIDE, package_release, public_path, public_source


def test_a_package_is_named_by_its_distribution_and_version():
    # pytest is installed in every environment the tests run in; its import name is its name
    assert package_release("pytest") == f"pytest=={metadata.version('pytest')}"
    # the import name differs from the distribution's (PyYAML ships the package yaml)
    assert package_release("yaml") == f"PyYAML=={metadata.version('PyYAML')}"
    assert public_source({"package": "yaml"}) == f"PyYAML=={metadata.version('PyYAML')}"


def test_a_package_no_distribution_claims_keeps_its_name():
    assert package_release("no_such_package_xyz") == "no_such_package_xyz"


def test_a_path_inside_the_project_is_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    assert public_source({"path": str(tmp_path / "models" / "tiny")}) == "models/tiny"
    assert public_source({"path": "models/tiny"}) == "models/tiny"


def test_a_path_outside_the_project_shows_only_its_name(tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    outside = tmp_path / "home" / "someone" / "weights.gguf"
    shown = public_source({"path": str(outside)})
    assert shown == f"{OUTSIDE}/weights.gguf"
    assert str(tmp_path) not in shown
    assert public_path(outside, root=tmp_path) == "home/someone/weights.gguf"


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ({"hub": "HuggingFaceTB/SmolLM2-135M-Instruct"}, "HuggingFaceTB/SmolLM2-135M-Instruct"),
        ({"hub": "org/m", "revision": "abc"}, "org/m"),
        ({"model": "openai/gpt-4o-mini"}, "openai/gpt-4o-mini"),
    ],
)
def test_a_hub_id_or_provider_model_is_shown_as_given(source, shown):
    assert public_source(source) == shown
