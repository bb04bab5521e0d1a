"""The session reads models.yaml once and checks it once against the thresholds files and the
plan; the suites that list the plan's cells for that check read the parsed config through their
context, not by asking the session for the config it is still checking."""

from types import SimpleNamespace

import pytest
from support.paths import write

from flipgate import FlipgateError, config
from flipgate.session import FlipgateSession

MODELS = """
audit:
  facets: {option_order: {datasets: [arc_challenge]}}
models:
  - {id: m1, backend: hf, source: {path: /nonexistent}, suites: [order]}
"""


def _session(tmp_path, request, thresholds: str) -> FlipgateSession:
    write(tmp_path / "models.yaml", MODELS)
    write(tmp_path / "thresholds" / "default.yaml", thresholds)
    options = {"--models": "models.yaml", "--thresholds": "thresholds"}
    pytest_config = SimpleNamespace(
        # every other option as not given: its default (this test run loads the plugin too)
        getoption=lambda name: options.get(name, request.config.getoption(name)),
        workerinput={"workercount": 2},  # a worker: no terminal to show notes on
        invocation_params=SimpleNamespace(dir=tmp_path),
        rootpath=tmp_path,
    )
    return FlipgateSession(pytest_config, "run")


@pytest.fixture
def parses(monkeypatch):
    """How often models.yaml is parsed."""
    count = []
    load = config.load_models
    monkeypatch.setattr(config, "load_models", lambda path: count.append(path) or load(path))
    return count


def test_models_yaml_is_parsed_and_checked_once(tmp_path, request, parses, monkeypatch):
    session = _session(tmp_path, request, "thresholds:\n  - {metric: flip_rate, max: 0.3}\n")
    asked = []  # every call of the session's audit_config, the check's own included
    check = FlipgateSession.audit_config
    monkeypatch.setattr(FlipgateSession, "audit_config", lambda s: asked.append(1) or check(s))
    cfg = session.audit_config()
    assert len(asked) == 1  # the order suite listed its cells from the parsed config it was given
    assert session.audit_config() is cfg and session.plan("order") is None
    assert list(cfg.models) == ["m1"] and len(parses) == 1


def test_a_failed_check_fails_every_time_and_never_hands_out_the_config(tmp_path, request, parses):
    session = _session(
        tmp_path, request, "thresholds:\n  - {metric: flip_rate, dataset: mmlu, max: 0.3}\n"
    )
    for _ in range(2):
        with pytest.raises(FlipgateError, match="mmlu"):
            session.audit_config()
    assert len(parses) == 1  # parsed once; checked again, and refused again
