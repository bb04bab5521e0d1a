"""The suite on an API model (litellm → loopback server serving a tiny local model): cards, the cost
guard, and no secret anywhere in what a run leaves behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.loopback_server import LoopbackServer
from support.paths import write
from support.suite_runs import PASSING, models_yaml, run_suite

from flipgate.backends.hf import HFBackend
from flipgate.cards import validate_card

KEY = "sk-flipgate-secret-a1b2c3d4e5f60718"


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    backend = HFBackend(
        {
            "id": "tiny",
            "backend": "hf",
            "source": {"path": str(tiny_model_dir)},
            "max_new_tokens": 3,
        }
    )
    srv = LoopbackServer(backend, api_key=KEY)
    srv.start()
    yield srv
    srv.stop()


def api_models(
    tmp: Path, server: LoopbackServer, price: str = "{input_per_mtok: 1.0, output_per_mtok: 4.0}"
) -> Path:
    return models_yaml(
        tmp / "models.yaml",
        f"""
  - id: tiny-api
    backend: litellm
    source: {{model: openai/tiny, api_base: "{server.base_url}", api_key_env: FLIPGATE_SECRET}}
    capabilities: {{logprobs: true}}
    readouts: [letter_logprob, regex]           # the random tiny model's text rarely parses
    max_new_tokens: 3
    concurrency: 4
    price: {price}
""",
        datasets="[arc_challenge]",
    )


def run_api_suite(tmp: Path, models: Path, *extra: str):
    thresholds = write(tmp / "thresholds" / "default.yaml", PASSING).parent
    os.environ["FLIPGATE_SECRET"] = KEY  # inherited by the pytest subprocess
    try:
        return run_suite(tmp, models, thresholds, *extra)
    finally:
        del os.environ["FLIPGATE_SECRET"]


@pytest.mark.slow
def test_suite_runs_on_an_api_model_and_leaks_no_key(server, tmp_path):
    proc = run_api_suite(
        tmp_path, api_models(tmp_path, server), "--budget", "1.0", "--pilot-items", "1", "-n", "2"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout and "projected total" in proc.stdout
    card = json.loads((tmp_path / "cards/tiny-api/arc_challenge.json").read_text())
    validate_card(card)
    assert card["order_robustness"]["option_order"]["letter_logprob"]["k"] == 6
    projection = json.loads(next((tmp_path / "runs").glob("*/cost_projection.json")).read_text())
    model = projection["models"][0]
    assert (
        model["pilot_calls"] == 6 and model["n_calls"] == 2 * 6 + 3 * 6
    )  # facet minus the pilot item, control
    assert 0 < model["usd"] < 1.0 and model["tokens_out"] > 0
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in files) and any("allure" in str(p) for p in files)
    leaked = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert not leaked and KEY not in proc.stdout + proc.stderr
    assert server.counts["unauthorized"] == 0  # the key did reach the server


@pytest.mark.slow
def test_cost_guard_refuses_a_run_over_budget(server, tmp_path):
    before = server.counts["requests"]
    proc = run_api_suite(
        tmp_path,
        api_models(tmp_path, server, "{input_per_mtok: 50000, output_per_mtok: 50000}"),
        "--budget",
        "0.5",
    )
    assert proc.returncode == 6, (
        proc.stdout[-2000:] + proc.stderr[-2000:]
    )  # exitcodes.BUDGET_REFUSED
    out = proc.stdout + proc.stderr
    assert "--budget 0.5000" in out and "tiny-api" in out and "the run was not started" in out
    assert (
        server.counts["requests"] == before and "Traceback" not in out
    )  # even the pilot would be over: no call
    assert not list((tmp_path / "runs").glob("*/trials.sqlite")) or "passed" not in proc.stdout
    assert KEY not in out


@pytest.mark.slow
def test_cost_guard_needs_a_price_for_unknown_models(server, tmp_path):
    models = api_models(tmp_path, server)
    models.write_text(
        models.read_text().replace("    price: {input_per_mtok: 1.0, output_per_mtok: 4.0}\n", "")
    )
    proc = run_api_suite(tmp_path, models, "--budget", "5")
    assert proc.returncode == 6 and "no price known for tiny-api" in proc.stdout + proc.stderr
