"""The cost guard refuses before it spends (requests counted at a loopback server), projects the
envelope suite, exits with its own status; the loopback server answers bad requests with clean JSON
errors; retries and timeouts of API calls reach the trials store, the terminal and the GRID card."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.forked import run_pytest
from support.loopback_server import Faults, LoopbackServer
from support.paths import REPO, write
from support.scripted import ScriptedBackend
from support.suite_runs import PASSING, models_yaml, run_suite, suite_env

from flipgate import exitcodes
from flipgate.backends.api import LiteLLMBackend
from flipgate.backends.base import Request
from flipgate.cards import validate_card
from flipgate.store import TrialStore

KEY = "sk-flipgate-guard-0badc0ffee123456"
#: ScriptedBackend answers every call with 10 input and 2 output tokens: at 1000 USD per million
#: output tokens (and nothing for input) a call costs 0.002 USD; the pilot's conservative estimate
#: of a call is its max_new_tokens (3) x 0.001 = 0.003 USD
COUNTED = "{input_per_mtok: 0, output_per_mtok: 1000}"


@pytest.fixture
def start_server(serve):
    """Start a loopback server answering "A" to every call, behind the test key."""
    return lambda **kw: serve(ScriptedBackend(rule=lambda r: "A"), api_key=KEY, **kw)


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("FLIPGATE_GUARD_KEY", KEY)  # inherited by the pytest subprocess


def guarded(
    tmp: Path,
    server: LoopbackServer,
    price: str | None = COUNTED,
    suites: str = "[order]",
    datasets: str = "[arc_challenge]",
) -> Path:
    price_line = f"\n    price: {price}" if price else ""
    return models_yaml(
        tmp / "models.yaml",
        f"""
  - id: guarded-api
    backend: litellm
    source: {{model: openai/guarded, api_base: "{server.base_url}",
      api_key_env: FLIPGATE_GUARD_KEY}}
    max_new_tokens: 3
    concurrency: 4
    retries: {{max_attempts: 10, base_delay_s: 0.01, max_delay_s: 0.05}}
    suites: {suites}{price_line}
""",
        datasets=datasets,
    )


def run(
    tmp: Path, models: Path, *extra: str, envelope: Path | None = None
) -> tuple[subprocess.CompletedProcess, str]:
    thresholds = write(tmp / "thresholds" / "default.yaml", PASSING).parent
    proc = run_suite(tmp, models, thresholds, *extra, envelope=envelope)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and KEY not in out, out[-3000:]
    return proc, out


def projection(tmp: Path) -> dict:
    return json.loads(next((tmp / "runs").glob("*/cost_projection.json")).read_text())


@pytest.mark.slow
def test_a_budget_too_small_for_one_call_makes_no_call(start_server, tmp_path):
    server = start_server()
    proc, out = run(
        tmp_path,
        guarded(tmp_path, server, "{input_per_mtok: 1.0, output_per_mtok: 4.0}"),
        "--budget",
        "0.000001",
    )
    assert proc.returncode == exitcodes.BUDGET_REFUSED == 6, out[-3000:]
    assert server.counts["requests"] == 0 and server.counts["unauthorized"] == 0
    assert (
        "the pilot of guarded-api" in out
        and "--budget 1e-06" in out
        and "the run was not started" in out
    )
    proj = projection(tmp_path)
    assert "refused" in proj and proj["pilot_calls"] == 0 and proj["pilot_usd"] == 0


@pytest.mark.slow
def test_a_model_without_a_price_is_refused_before_any_call(start_server, tmp_path):
    server = start_server()
    proc, out = run(tmp_path, guarded(tmp_path, server, price=None), "--budget", "5")
    assert proc.returncode == exitcodes.BUDGET_REFUSED, out[-3000:]
    assert server.counts["requests"] == 0
    assert "no price known for guarded-api (openai/guarded)" in out
    assert "price: {input_per_mtok: .., output_per_mtok: ..}" in out and "models.yaml" in out


@pytest.mark.slow
def test_bad_input_keeps_the_usage_error_status(start_server, tmp_path, monkeypatch):
    server = start_server()
    monkeypatch.delenv("FLIPGATE_GUARD_KEY")
    proc, out = run(tmp_path, guarded(tmp_path, server), "--budget", "5")
    assert proc.returncode == exitcodes.USAGE_ERROR, out[-3000:]
    assert "FLIPGATE_GUARD_KEY" in out and server.counts["requests"] == 0


@pytest.mark.parametrize(
    "budget,pilot_calls",
    [
        # the whole pilot (6 calls, 0.012 USD, per dataset) fits; the run (0.144 in all) does not
        (0.05, 12),
        # after arc_challenge's pilot (0.012 spent) commonsense_qa's (up to 0.018)
        # could pass the budget
        (0.025, 6),
    ],
)
@pytest.mark.slow
def test_the_pilot_stays_within_the_budget(start_server, tmp_path, budget, pilot_calls):
    """One pilot item: K=6 calls per facet cell; a control's pilot (the canonical ordering K times)
    is answered by the cache."""
    server = start_server()
    models = guarded(tmp_path, server, datasets="[arc_challenge, commonsense_qa]")
    proc, out = run(tmp_path, models, "--budget", str(budget), "--pilot-items", "1")
    assert proc.returncode == exitcodes.BUDGET_REFUSED, out[-3000:]
    assert server.counts["requests"] == server.counts["ok"] == pilot_calls
    assert "the run was not started" in out
    proj = projection(tmp_path)
    assert proj["pilot_calls"] == pilot_calls and proj["pilot_usd"] == pytest.approx(
        0.002 * pilot_calls
    )
    assert proj["pilot_usd"] <= budget
    if pilot_calls == 12:
        assert (
            "exceeds --budget 0.0500" in out and "guarded-api" in out and "projected total" in out
        )
        model = proj["models"][0]
        assert model["pilot_calls"] == 12 and model["n_calls"] == 2 * (2 * 6 + 3 * 6)
        assert model["usd"] + model["pilot_usd"] == pytest.approx(0.144)
    else:
        assert (
            "the pilot of guarded-api on option_order/commonsense_qa (6 calls, up to 0.0180 USD"
            in out
        )


ENVELOPE = """
name: guard-envelope
benchmarks: [arc_easy]
items_per_benchmark: 6
seeds: 3
roster: [guarded-api]
axes:
  template: [T1, T3]
  decoding: [greedy, T0.7]
  few_shot: [0, 3]
  scoring: [free_form, logprob]
  quantization: [fp32, nf4]
"""


@pytest.mark.slow
def test_the_envelope_suite_is_projected_and_refused(start_server, tmp_path):
    server = start_server()
    envelope = write(tmp_path / "env.yaml", ENVELOPE)
    models = guarded(
        tmp_path, server, "{input_per_mtok: 1.0, output_per_mtok: 4.0}", suites="[envelope]"
    )
    proc, out = run(tmp_path, models, "--budget", "0.0001", envelope=envelope)
    assert proc.returncode == exitcodes.BUDGET_REFUSED, out[-3000:]
    assert server.counts["requests"] == 0 and "exceeds --budget 0.0001" in out
    (model,) = projection(tmp_path)["models"]
    # an API model runs its own precision (fp32 only); logprob scoring is greedy only:
    # greedy 2 templates x 2 shots x 2 scorings x 6 items + T0.7 free-form 2 x 2 x 3 seeds x 6 items
    assert (
        model["suite"] == "envelope"
        and model["n_calls"] == 8 * 6 + 4 * 3 * 6
        and model["pilot_calls"] == 0
    )
    assert model["tokens_in"] > 0 and model["usd"] > 0.0001 and "envelope" in out


@pytest.mark.slow
def test_the_judge_suite_is_projected_with_k_calls_per_set(start_server, tmp_path):
    server = start_server()
    models = guarded(
        tmp_path, server, "{input_per_mtok: 1.0, output_per_mtok: 4.0}", suites="[judges]"
    )
    text = models.read_text().replace(
        "audit:\n", "audit:\n  judges: {datasets: [arc_easy_answers], items_per_dataset: 3}\n", 1
    )
    models.write_text(text)
    proc, out = run(tmp_path, models, "--budget", "0.0001")
    assert proc.returncode == exitcodes.BUDGET_REFUSED, out[-3000:]
    assert server.counts["requests"] == 0 and "exceeds --budget 0.0001" in out
    (model,) = projection(tmp_path)["models"]
    # 3 candidate sets x 4 orderings (K = 6 rounded down to whole Latin squares of 4 candidates),
    # each a listwise judgement of up to 400 tokens
    assert model["suite"] == "judges" and model["n_calls"] == 3 * 4
    assert model["tokens_out"] == 3 * 4 * 400 and model["usd"] > 0.0001


@pytest.mark.slow
def test_the_readouts_suite_and_its_consensus_judge_are_projected(start_server, tmp_path):
    from flipgate.judging.choice import load_agreement_set

    server = start_server()
    models = guarded(
        tmp_path, server, "{input_per_mtok: 1.0, output_per_mtok: 4.0}", suites="[decomposition]"
    )
    plan = (
        "audit:\n  judge_consensus: {k: 4}\n  decomposition: {datasets: [basic_arithmetic], "
        "axes: [option_order], readouts: [regex, judge], items_per_dataset: 3, judge: "
        f"{{agreement_set: {REPO}/fixtures/judge/agreement.jsonl}}}}\n"
    )
    models.write_text(models.read_text().replace("audit:\n", plan, 1))
    proc, out = run(tmp_path, models, "--budget", "0.0001")
    assert proc.returncode == exitcodes.BUDGET_REFUSED, out[-3000:]
    assert server.counts["requests"] == 0
    (model,) = projection(tmp_path)["models"]
    replies = load_agreement_set(REPO / "fixtures/judge/agreement.jsonl")
    gate = 4 * len(replies) + sum(r.answer is not None for r in replies)
    # 3 items x 4 cyclic shifts, each reply judged over the 4 rotations of its option list
    assert model["suite"] == "decomposition" and model["n_calls"] == 3 * 4 + 3 * 4 * 4 + gate


CONTINUITY = (
    "audit:\n  continuity: {sweeps: [numeric_comparison, counting_distractors, spatial_location,"
    " loudness], sources: 2, samples: 2}\n"
)


@pytest.mark.slow
def test_the_continuity_suite_is_projected_and_makes_exactly_those_calls(start_server, tmp_path):
    """2 sweeps x 20 inputs: 40 greedy answers (shared by the estimators), DSE 2 samples each,
    FESTA 2 on rewordings + 2 on complements (counting: rewordings only); the image and audio
    sweeps are skipped for a model without either, and so is logprob without log-probs."""
    server = start_server()
    models = guarded(
        tmp_path, server, "{input_per_mtok: 1.0, output_per_mtok: 4.0}", suites="[continuity]"
    )
    models.write_text(models.read_text().replace("audit:\n", CONTINUITY, 1))
    proc, out = run(tmp_path, models, "--budget", "0.0001")
    assert proc.returncode == exitcodes.BUDGET_REFUSED, out[-3000:]
    assert server.counts["requests"] == 0
    (model,) = projection(tmp_path)["models"]
    calls = 40 + 40 * 2 + (20 * 4 + 20 * 2)
    assert model["suite"] == "continuity" and model["n_calls"] == calls
    shutil.rmtree(tmp_path / "runs")
    proc, out = run(tmp_path, models, "--budget", "10", "-rs")
    assert proc.returncode == 0, out[-3000:]
    assert server.counts["ok"] == calls  # the projection was exact
    assert "guarded-api takes no images; spatial_location is an image sweep" in out
    assert "guarded-api takes no audio; loudness is an audio sweep" in out
    assert "the logprob estimator needs a single-token spelling" in out


@pytest.mark.slow
def test_retries_and_timeouts_reach_the_store_terminal_and_card(start_server, tmp_path):
    server = start_server(
        faults=Faults(rate_limit=0.2, server_error=0.1, retry_after_s=0.01, seed=5)
    )
    proc, out = run(tmp_path, guarded(tmp_path, server), "--budget", "10", "--pilot-items", "1")
    assert proc.returncode == 0, out[-3000:]
    retried = server.counts["rate_limit"] + server.counts["server_error"]
    assert (
        retried > 0 and server.counts["ok"] == 6 + 12 + 18
    )  # pilot, the facet's other items, the control
    store = TrialStore(next((tmp_path / "runs").glob("*/trials.sqlite")))
    calls = store.calls()["guarded-api"]
    assert calls == {"requests": 36, "retries": retried, "timeouts": 0, "failures": 0}
    assert calls["requests"] + calls["retries"] == server.counts["requests"]
    sources = dict(
        store.conn.execute(
            "SELECT source, requests FROM calls WHERE model_id = 'guarded-api'"
        ).fetchall()
    )
    assert sources == {"pilot": 6, "main": 30}
    assert f"flipgate: guarded-api: 36 API calls, {retried} retries, 0 timeouts, 0 failed" in out
    card = json.loads((tmp_path / "cards/guarded-api/arc_challenge.json").read_text())
    validate_card(card)
    assert card["run"]["calls"] == calls
    markdown = (tmp_path / "cards/guarded-api/arc_challenge.md").read_text()
    assert f"API calls: 36 requests, {retried} retries, 0 timeouts, 0 failed." in markdown


def request(i: int) -> Request:
    return Request(
        (("user", f"Question {i}? A. x B. y"),), "Answer:", ("A", "B"), key=("d", str(i), "f", 0, 0)
    )


def backend_for(server: LoopbackServer, **extra) -> LiteLLMBackend:
    return LiteLLMBackend(
        {
            "id": "api",
            "backend": "litellm",
            "readouts": ["regex"],
            "concurrency": 8,
            "source": {
                "model": "openai/scripted",
                "api_base": server.base_url,
                "api_key_env": "FLIPGATE_GUARD_KEY",
            },
            "retries": {"max_attempts": 10, "base_delay_s": 0.01, "max_delay_s": 0.05},
            **extra,
        }
    )


@pytest.mark.slow
def test_backend_counts_timeouts_and_failures(start_server, capfd):
    server = start_server(faults=Faults(slow=0.4, slow_s=2.5, seed=2))
    backend = backend_for(server, timeout_s=1.0)
    outs = backend.complete([request(i) for i in range(8)])
    assert [o.text for o in outs] == ["Answer: A"] * 8
    stats = backend.call_stats
    assert stats["requests"] == 8 and stats["failures"] == 0
    # every slow reply times out; on a loaded machine a normal one may too (and is retried alike)
    assert stats["timeouts"] >= server.counts["slow"] > 0 and stats["retries"] == stats["timeouts"]
    assert backend.retries == stats["retries"]
    wrong = start_server()
    wrong.api_key = "another-key"
    failing = backend_for(wrong)
    with pytest.raises(Exception, match="status=401"):
        failing.complete([request(0)])
    assert failing.call_stats == {"requests": 1, "retries": 0, "timeouts": 0, "failures": 1}
    assert (
        "Traceback" not in capfd.readouterr().err
    )  # the slow replies' clients had gone: no traceback


def post(
    server: LoopbackServer, body: bytes, key: str | None = KEY, length: str | None = None
) -> tuple[int, dict]:
    host, port = server.httpd.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.putrequest("POST", "/v1/chat/completions")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", length if length is not None else str(len(body)))
    if key:
        conn.putheader("Authorization", f"Bearer {key}")
    conn.endheaders(body)
    resp = conn.getresponse()
    status, payload = resp.status, resp.read()
    conn.close()
    assert b"Traceback" not in payload
    return status, json.loads(payload)


GOOD = json.dumps(
    {"model": "x", "messages": [{"role": "user", "content": "Q? A. x B. y"}]}
).encode()


@pytest.mark.parametrize(
    "body,length,needle",
    [
        (b"{not json", None, "not valid JSON"),
        (b"\xff\xfe", None, "not valid JSON"),
        (b"[1, 2]", None, "JSON object"),
        (b'{"model": "x"}', None, "messages"),
        (b'{"messages": "hi"}', None, "messages"),
        (b'{"messages": [3]}', None, "role"),
        (
            b'{"messages": [{"role": "user", "content": '
            b'[{"type": "image_url", "image_url": {"url": "x"}}]}]}',
            None,
            "",
        ),
        (b"", None, "not valid JSON"),
        (b"", "many", "Content-Length"),
    ],
)
def test_server_answers_a_malformed_body_with_400_json(start_server, capfd, body, length, needle):
    server = start_server()
    status, payload = post(server, body, length=length)
    assert status == 400 and payload["error"]["type"] == "invalid_request_error", payload
    assert needle in payload["error"]["message"]
    assert server.counts["bad_request"] == 1 and server.counts["requests"] == 0
    assert post(server, GOOD)[0] == 200  # the server goes on answering
    assert "Traceback" not in capfd.readouterr().err


def test_server_checks_the_key_before_reading_the_body(start_server, capfd):
    server = start_server()
    for key in ("wrong-key", None):
        status, payload = post(server, b"{not json", key=key)
        assert status == 401 and payload["error"]["type"] == "authentication_error"
    assert server.counts["unauthorized"] == 2 and server.counts["bad_request"] == 0
    assert post(server, GOOD, key="wrong-key")[0] == 401
    assert "Traceback" not in capfd.readouterr().err


def test_server_answers_a_backend_failure_with_500_json(start_server, capfd):
    server = LoopbackServer(ScriptedBackend(rule=lambda r: 1 / 0), api_key=KEY)
    server.start()
    try:
        status, payload = post(server, GOOD)
    finally:
        server.stop()
    assert status == 500 and payload["error"]["type"] == "server_error"
    assert "ZeroDivisionError" in payload["error"]["message"]
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
def test_litellm_reads_its_bundled_price_map():
    """flipgate sets LITELLM_LOCAL_MODEL_COST_MAP before litellm is imported (no price-map
    download)."""
    code = (
        "import os, sys\n"
        "from flipgate.cost import price_per_token\n"
        "assert 'litellm' not in sys.modules\n"
        "price = price_per_token("
        "{'backend': 'litellm', 'source': {'model': 'openai/gpt-4o-mini'}})\n"
        "from litellm.litellm_core_utils import get_model_cost_map as m\n"
        "info = getattr(m, '_cost_map_source_info', None)\n"
        "print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'], getattr(info, 'source', 'local'), "
        "price[0] > 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "local", "True"]


# -- issue #42: the budget is a hard bound ---------------------------------------------------------


@pytest.mark.parametrize(
    "option,value",
    [("--budget", "nan"), ("--budget", "inf"), ("--budget", "-0.5"), ("--pilot-items", "0")],
)
@pytest.mark.slow
def test_a_budget_or_pilot_that_bounds_nothing_is_refused_with_no_call(
    start_server, tmp_path, option, value
):
    """``--budget nan`` used to print "projected 2.9432 (budget nan)" and send every paid call;
    ``--pilot-items 0`` projected 0.0000. Each is one usage-error line naming the option and the
    value, before anything runs."""
    server = start_server()
    extra = (option, value) if option == "--budget" else ("--budget", "5", option, value)
    proc, out = run(tmp_path, guarded(tmp_path, server), *extra)
    assert proc.returncode == exitcodes.USAGE_ERROR, out[-3000:]
    assert f"argument {option}: '{value}' is not a" in out
    assert server.counts["requests"] == 0 and not (tmp_path / "runs").exists()


def run_modules(tmp: Path, models: Path, *args: str) -> tuple[subprocess.CompletedProcess, str]:
    """pytest on test modules outside the installed flipgate_suites (``args`` names them)."""
    thresholds = write(tmp / "thresholds" / "default.yaml", PASSING).parent
    cmd = [
        *args,
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    ]
    for option, folder in (("--cache-dir", "cache"), ("--runs-dir", "runs")):
        cmd += [option, str(tmp / folder)]
    cmd += ["--grid-cards-dir", str(tmp / "cards"), "--manifests-dir", str(tmp / "manifests")]
    cmd += [
        "--models",
        str(models),
        "--thresholds",
        str(thresholds),
        "--alluredir",
        str(tmp / "al"),
    ]
    proc = run_pytest(cmd, suite_env(), timeout=600, cwd=tmp)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and KEY not in out, out[-3000:]
    return proc, out


@pytest.mark.slow
def test_suites_collected_from_another_copy_are_priced(start_server, tmp_path):
    """A checkout's suites/ while flipgate_suites is installed from another copy: the guard
    prices the suites the collected modules name, wherever they lie (it used to price nothing
    and send every call)."""
    server = start_server()
    copy = tmp_path / "checkout" / "suites" / "facets"
    copy.mkdir(parents=True)
    shutil.copy(REPO / "suites" / "order" / "test_option_order.py", copy)
    models = guarded(tmp_path, server, "{input_per_mtok: 1.0, output_per_mtok: 4.0}")
    proc, out = run_modules(tmp_path, models, str(copy), "--budget", "0.000001")
    assert proc.returncode == exitcodes.BUDGET_REFUSED, out[-3000:]
    assert "the pilot of guarded-api" in out and server.counts["requests"] == 0
    assert projection(tmp_path)["suites"] == ["order"]


@pytest.mark.slow
def test_a_suite_the_guard_cannot_find_makes_no_call(start_server, tmp_path):
    """A module whose suite the guard cannot read (not a literal) is collected but not priced:
    under --budget its cells fail before any call, naming the suite."""
    server = start_server()
    module = write(
        tmp_path / "mine" / "test_dynamic.py",
        'SUITE = "".join(["ord", "er"])\nPART = "option_order"\n\n\n'
        "def test_dynamic(flipgate_cell):\n    flipgate_cell.run()\n",
    )
    proc, out = run_modules(tmp_path, guarded(tmp_path, server), str(module), "--budget", "5")
    assert proc.returncode == exitcodes.USAGE_ERROR, out[-3000:]
    assert "the order suite was collected but not priced" in out
    assert server.counts["requests"] == 0 and projection(tmp_path)["suites"] == []


def test_a_suites_default_projection_prices_the_requests_it_declares():
    """``Suite.project``'s default (a third-party suite's): its ``requests()`` per case model,
    a local model's calls counted free, an API model's at its price; a suite that gives neither
    ``requests()`` nor ``project()``, or a case whose calls name no model, is refused in one
    line, so ``--budget`` never waves it through."""
    from types import SimpleNamespace

    from flipgate import FlipgateError
    from flipgate.backends.base import estimate_tokens
    from flipgate.suite.api import Case, Suite

    class Declared(Suite):
        name = "declared"

        def cases(self, ctx, part):
            return [Case(m, m, m, models=(m,)) for m in ("api", "local")]

    class Counted(Declared):
        def requests(self, auditor, param):
            return [request(i) for i in range(3)]

    price = {"input_per_mtok": 1.0, "output_per_mtok": 2000.0}
    models = {
        "api": {"backend": "litellm", "price": price, "max_new_tokens": 4},
        "local": {"backend": "hf"},
    }
    auditor = SimpleNamespace(config=SimpleNamespace(models=models), cache=None)
    api, local = Counted().project(SimpleNamespace(), auditor, None)
    t_in, t_out = estimate_tokens(request(0), 4)
    assert (api.suite, api.n_calls, api.tokens_out) == ("declared", 3, 3 * t_out)
    assert api.usd == pytest.approx(3 * (t_in * 1e-6 + t_out * 2000e-6))
    assert (local.n_calls, local.usd) == (3, 0.0)
    with pytest.raises(FlipgateError, match="'declared': the cost guard .* cannot price its calls"):
        Declared().project(SimpleNamespace(), auditor, None)

    class Panel(Counted):  # a panel-wide case calls models but gates none: its calls unpriced
        def cases(self, ctx, part):
            return [Case("all", "all", "all")]

    with pytest.raises(FlipgateError) as refused:
        Panel().project(SimpleNamespace(), auditor, None)
    assert str(refused.value) == (
        "suite 'declared': the cost guard (--budget) cannot price case 'all': it names no models "
        "(Case.models), so whose calls its requests() are is unknown; define project() "
        "(flipgate.suite.api.Suite)"
    )
