"""Strict configuration input (issue #28): models.yaml, thresholds files and envelopes refuse
duplicate keys, alias bombs, non-finite numbers, integers that are not integers, unbounded sizes
and malformed model ids, with one line naming the file, the field (or line) and the value."""

from __future__ import annotations

import time

import pytest
from support.bad_input import MODELS, Case, models_with, run_in_process, th
from support.paths import write
from support.scripted import ScriptedBackend

from flipgate import FlipgateError
from flipgate.backends.replay import ReplayBackend
from flipgate.calls import Auditor, Paths
from flipgate.config import MAX_ITEMS_PER_DATASET, AuditConfig, load_models, parse_thresholds
from flipgate.envelope.spec import load_envelope
from flipgate.exitcodes import USAGE_ERROR
from flipgate.items import DatasetSpec
from flipgate.order.measure import order_cells
from flipgate.store import export_replay
from flipgate.yamlio import MAX_ALIASES, MAX_DEPTH, load_strict

#: a message line stays short whatever the value (values are cut to ~60 characters)
MAX_LINE = 400


def bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs" flow mapping: ``width ** levels`` values from ``width * (levels - 1)``
    aliases (fewer than MAX_ALIASES: only the expanded size gives it away)."""
    rows = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    rows += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "{" + ", ".join(rows) + "}"


def the_line(text: str, *fragments: str) -> str:
    """The one line of ``text`` holding every fragment (fails when none does)."""
    lines = [line for line in text.splitlines() if all(f in line for f in fragments)]
    assert lines, f"no line holds all of {fragments}:\n{text[-3000:]}"
    return lines[0]


def refused(load, *fragments: str) -> str:
    """``load()`` raises one short FlipgateError line holding every fragment."""
    start = time.monotonic()
    with pytest.raises(FlipgateError) as err:
        load()
    message = str(err.value)
    assert time.monotonic() - start < 10, "refusing took too long"
    assert "\n" not in message and len(message) <= MAX_LINE, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def audit_with(extra_audit: str) -> str:
    """A models.yaml with ``extra_audit`` under audit (its own items_per_dataset, if any)."""
    text = models_with(extra_audit=extra_audit)
    if extra_audit.startswith("items_per_dataset"):
        text = text.replace("  items_per_dataset: 2\n", "", 1)
    return text


def models_file(tmp_path, text: str):
    path = write(tmp_path / "models.yaml", "")
    path.write_text(text)  # as is: no dedent (exact lines matter)
    return lambda: load_models(path)


def thresholds_file(tmp_path, text: str):
    path = tmp_path / "default.yaml"
    path.write_text(text)
    return lambda: parse_thresholds(path)


ENVELOPE = """name: e
benchmarks: [truthfulqa_mc]
axes:
  template: [T1]
  decoding: [greedy]
  few_shot: [0, 1]
  scoring: [logprob]
  quantization: [bf16]
"""


def envelope_file(tmp_path, text: str):
    path = tmp_path / "envelope.yaml"
    path.write_text(text)
    return lambda: load_envelope(path, ["m1"])


# -- the real suites, in-process: exit status 4, one line, no traceback ------------------------

SUITE_CASES = [
    Case(
        "duplicate-models-list",
        models=MODELS + "models:\n  - {id: m2, backend: hf, source: {path: /x}}\n",
        expect=("models.yaml", "line 9", "duplicate key 'models'", "first at line 7"),
    ),
    Case(
        "duplicate-threshold-bound",
        thresholds="thresholds:\n  - {metric: flip_rate, max: 0.25, max: 1.0}\n",
        expect=("default.yaml", "line 2", "duplicate key 'max'"),
    ),
    Case(
        "alias-bomb-in-judge-weights",
        models=models_with(
            extra_audit=f"judges: {{datasets: [arc_easy_answers], weights: {bomb()}}}"
        ),
        expect=("models.yaml", "line 5", "100000 values", "aliases"),
    ),
    Case(
        "alias-bomb-in-dataset-key",
        models=models_with(f"option_order: {{datasets: [{{name: mmlu, split: {bomb()}}}]}}"),
        expect=("models.yaml", "line 4", "100000 values"),
    ),
    Case(
        "nan-tie-tolerance",
        models=models_with(
            extra_audit="judges: {datasets: [arc_easy_answers], tie_tolerance: .nan}"
        ),
        expect=("models.yaml", "audit.judges.tie_tolerance", "finite", "nan"),
    ),
    Case(
        "k-float",
        models=models_with(extra_audit="k: 6.0"),
        expect=("models.yaml", "audit.k", "6.0", "integer"),
    ),
    Case(
        "seed-negative",
        models=models_with(extra_audit="seed: -1"),
        expect=("models.yaml", "audit.seed", "-1", "minimum"),
    ),
    Case(
        "bootstrap-n-huge",
        models=models_with(extra_audit="bootstrap: {n: 1000000000}"),
        expect=("models.yaml", "audit.bootstrap.n", "1000000000", "maximum of 100000"),
    ),
    Case(
        "items-per-dataset-option-huge",
        args=("--items-per-dataset", "1000000000"),
        expect=("--items-per-dataset", "1000000000", str(MAX_ITEMS_PER_DATASET)),
    ),
    Case(
        "model-id-trailing-newline",
        models=models_with(model='{id: "smol\\n", backend: hf, source: {path: /x}}'),
        expect=("models.yaml", "models[0].id", "'smol\\n'"),
    ),
    # issue #42: a thresholds file that would not be read is refused, never ignored
    Case(
        "thresholds-yml-override",
        extra_files={"m1.yml": th("{metric: flip_rate, max: 0.0}")},
        expect=("m1.yml", "would not be read", "rename it m1.yaml"),
    ),
    Case(
        "thresholds-upper-case-suffix",
        extra_files={"m1.YAML": th("{metric: flip_rate, max: 0.0}")},
        expect=("m1.YAML", "rename it m1.yaml"),
    ),
    # issue #42: every number option is checked when it is parsed (one line naming it and the value)
    Case("budget-nan", args=("--budget", "nan"), expect=("--budget", "'nan'", "finite")),
    Case("budget-inf", args=("--budget", "inf"), expect=("--budget", "'inf'", "finite")),
    Case("budget-negative", args=("--budget", "-1"), expect=("--budget", "'-1'", "0 or more")),
    Case("pilot-items-zero", args=("--pilot-items", "0"), expect=("--pilot-items", "'0'")),
    Case("pilot-items-negative", args=("--pilot-items", "-2"), expect=("--pilot-items", "'-2'")),
    Case(
        "model-id-too-long",
        models=models_with(model=f"{{id: {'m' * 300}, backend: hf, source: {{path: /x}}}}"),
        expect=("models.yaml", "models[0].id", "too long", "mmm..."),
    ),
]


@pytest.mark.parametrize("case", SUITE_CASES, ids=[c.id for c in SUITE_CASES])
def test_strict_input_is_one_clean_usage_error(case, tmp_path, capsys):
    start = time.monotonic()
    status, text = run_in_process(tmp_path, case, capsys)
    assert time.monotonic() - start < 60, "collection took too long"
    assert status == USAGE_ERROR, text[-3000:]
    assert "Traceback" not in text and 'File "' not in text, text[-3000:]
    line = the_line(text, *case.expect)
    assert len(line) <= MAX_LINE, line


# -- 1. duplicate keys ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,fragments",
    [
        (MODELS + "models: []\n", ("line 9", "duplicate key 'models'")),
        (
            "audit:\n  k: 6\n  seed: 1\n  k: 8\nmodels:\n  - {id: m1, backend: hf, "
            "source: {path: /x}}\n",
            ("line 4", "duplicate key 'k'", "first at line 2"),
        ),
        (
            "models:\n  - id: m1\n    backend: hf\n    backend: litellm\n    source: {path: /x}\n",
            ("line 4", "duplicate key 'backend'"),
        ),
        (
            "models:\n  - {id: m1, backend: hf, source: {path: /x, path: /y}}\n",
            ("line 2", "duplicate key 'path'"),
        ),
    ],
    ids=["models-twice", "audit-k-twice", "block-mapping", "flow-mapping"],
)
def test_duplicate_key_in_models_file(tmp_path, text, fragments):
    refused(models_file(tmp_path, text), "models.yaml", *fragments)


@pytest.mark.parametrize(
    "text,fragments",
    [
        (
            "thresholds:\n  - metric: flip_rate\n    max: 0.25\n    max: 1.0\n",
            ("line 4", "duplicate key 'max'", "first at line 3"),
        ),
        ("level: 0.9\nlevel: 0.5\nthresholds: []\n", ("line 2", "duplicate key 'level'")),
        (th("{metric: flip_rate, max: 0.2, rule: lower, rule: warn}"), ("duplicate key 'rule'",)),
    ],
    ids=["block-max-twice", "level-twice", "flow-rule-twice"],
)
def test_duplicate_key_in_thresholds_file(tmp_path, text, fragments):
    refused(thresholds_file(tmp_path, text), "default.yaml", *fragments)


def test_duplicate_key_in_envelope(tmp_path):
    text = ENVELOPE.replace(
        "  scoring: [logprob]\n", "  scoring: [logprob]\n  scoring: [free_form]\n"
    )
    refused(envelope_file(tmp_path, text), "envelope.yaml", "line 8", "duplicate key 'scoring'")


def test_equal_keys_in_different_mappings_and_merge_overrides_are_fine(tmp_path):
    data = load_strict("a: &b {x: 1, y: 2}\nc: {<<: *b, y: 3}\nd: {x: 1}\n", "f.yaml")
    assert data == {"a": {"x": 1, "y": 2}, "c": {"x": 1, "y": 3}, "d": {"x": 1}}


# -- 2. alias bombs and long values ------------------------------------------------------------


def test_billion_laughs_under_the_alias_count_is_refused_by_its_size(tmp_path):
    assert 9 * 8 <= MAX_ALIASES  # the expanded size, not the alias count, refuses this one
    text = models_with(extra_audit=f"judge_consensus: {{weights: {bomb()}}}")
    refused(models_file(tmp_path, text), "models.yaml", "line 5", "100000 values")


def test_more_aliases_than_the_limit_are_refused(tmp_path):
    many = ", ".join(["*d"] * (MAX_ALIASES + 1))
    text = models_with(f"option_order: {{datasets: [&d mmlu, {many}]}}")
    refused(
        models_file(tmp_path, text), "models.yaml", "line 4", f"more than {MAX_ALIASES} aliases"
    )


def test_a_few_aliases_are_fine(tmp_path):
    text = models_with(
        "option_order: {datasets: [&d mmlu]}",
        extra_audit="controls: {same_ordering: {datasets: [*d]}}",
    )
    cfg = models_file(tmp_path, text)()
    assert [d.name for _, d in cfg.controls["same_ordering"]] == ["mmlu"]


@pytest.mark.parametrize(
    "text",
    [
        "a: &w [*w]\n",
        "a: &w {b: *w}\n",
    ],
)
def test_an_alias_inside_its_own_anchor_is_refused(text):
    refused(lambda: load_strict(text, "f.yaml"), "f.yaml", "line 1", "refers to the value")


def test_bomb_in_thresholds_file(tmp_path):
    text = th(f"{{metric: flip_rate, max: 0.2, why: {bomb()}}}")
    refused(thresholds_file(tmp_path, text), "default.yaml", "line 2", "100000 values")


@pytest.mark.parametrize(
    "text,fragments",
    [
        (models_with(extra_audit=f"k: {'x' * 100_000}"), ("audit.k", "is not of type 'integer'")),
        (
            models_with(extra_audit=f"judge: [{', '.join(['abc'] * 20_000)}]"),
            ("audit.judge", "is not of type 'string'"),
        ),
        (
            models_with(extra_audit=f"bootstrap: [{', '.join(['n'] * 20_000)}]"),
            ("audit.bootstrap", "is not of type 'object'"),
        ),
    ],
    ids=["long-string", "long-list", "long-list-for-mapping"],
)
def test_schema_messages_cut_long_values(tmp_path, text, fragments):
    message = refused(models_file(tmp_path, text), "models.yaml", *fragments)
    assert "..." in message


def test_deep_nesting_is_one_line(tmp_path):
    text = "models: " + "[" * 5000 + "]" * 5000 + "\n"
    refused(models_file(tmp_path, text), "models.yaml", "line 1", f"nested more than {MAX_DEPTH}")


def test_deep_nesting_through_aliases_is_refused():
    """60 aliases, each one level around the last: few values, but 60 levels deep."""
    rows = ["l0: &l0 [x]"] + [f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, 60)]
    text = "{" + ", ".join(rows) + "}\n"
    refused(lambda: load_strict(text, "f.yaml"), "f.yaml", f"nest more than {MAX_DEPTH} levels")


def test_bad_yaml_is_one_line_with_its_line(tmp_path):
    refused(
        models_file(tmp_path, "models:\n  - {id: m1\n"), "models.yaml", "not valid YAML", "line"
    )


# -- 3. non-finite numbers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra_audit,field,value",
    [
        (
            "judges: {datasets: [arc_easy_answers], tie_tolerance: .nan}",
            "audit.judges.tie_tolerance",
            "nan",
        ),
        (
            "continuity: {sweeps: [numeric_comparison], temperature: .nan}",
            "audit.continuity.temperature",
            "nan",
        ),
        (
            "continuity: {sweeps: [numeric_comparison], top_p: .inf}",
            "audit.continuity.top_p",
            "inf",
        ),
        ("bootstrap: {level: .nan}", "audit.bootstrap.level", "nan"),
        ("odi: {ess_target: .inf}", "audit.odi.ess_target", "inf"),
        (
            "judge_consensus: {weights: [.nan, 0.4, 0.15, 0.05]}",
            "audit.judge_consensus.weights[0]",
            "nan",
        ),
        (
            "judge_consensus: {weights: {score: -.inf, borda: 1, top: 0, uncertainty: 0}}",
            "audit.judge_consensus.weights.score",
            "-inf",
        ),
    ],
)
def test_non_finite_number_in_audit(tmp_path, extra_audit, field, value):
    text = models_with(extra_audit=extra_audit)
    refused(models_file(tmp_path, text), "models.yaml", f"field {field}:", "finite", value)


@pytest.mark.parametrize(
    "model,field",
    [
        ("decoding: {temperature: .nan}", "models[0].decoding.temperature"),
        ("timeout_s: .inf", "models[0].timeout_s"),
        ("price: {input_per_mtok: .nan, output_per_mtok: 1}", "models[0].price.input_per_mtok"),
    ],
)
def test_non_finite_number_in_a_model(tmp_path, model, field):
    text = models_with(model=f"{{id: m1, backend: hf, source: {{path: /x}}, {model}}}")
    refused(models_file(tmp_path, text), "models.yaml", f"field {field}:", "finite")


@pytest.mark.parametrize(
    "text,field",
    [
        (th("{metric: flip_rate, max: 0.2}", head="level: .nan\n"), "level"),
        (th("{metric: flip_rate, max: 0.2, level: .inf}"), "thresholds[0].level"),
        (th("{metric: flip_rate, max: .nan}"), "thresholds[0].max"),
    ],
)
def test_non_finite_number_in_thresholds(tmp_path, text, field):
    refused(thresholds_file(tmp_path, text), "default.yaml", f"field {field}:", "finite")


def test_non_finite_number_in_envelope(tmp_path):
    text = ENVELOPE.replace("[truthfulqa_mc]", "[{name: truthfulqa_mc, n: .inf}]")
    refused(envelope_file(tmp_path, text), "envelope.yaml", "field benchmarks[0].n:", "inf")


# -- 4. integers that are not integers -----------------------------------------------------------


@pytest.mark.parametrize(
    "extra_audit,field,value",
    [
        ("k: 6.0", "audit.k", "6.0"),
        ("seed: 42.0", "audit.seed", "42.0"),
        ("seed: -1", "audit.seed", "-1"),
        ("items_per_dataset: true", "audit.items_per_dataset", "True"),
        ("bootstrap: {n: 1000.0}", "audit.bootstrap.n", "1000.0"),
        ("judges: {datasets: [arc_easy_answers], k: 8.0}", "audit.judges.k", "8.0"),
        (
            "continuity: {sweeps: [numeric_comparison], samples: 10.0}",
            "audit.continuity.samples",
            "10.0",
        ),
        ("odi: {seed: -5}", "audit.odi.seed", "-5"),
        ("odi: {num_chains: true}", "audit.odi.num_chains", "True"),
    ],
)
def test_integer_fields_take_integers_only(tmp_path, extra_audit, field, value):
    text = audit_with(extra_audit)
    refused(models_file(tmp_path, text), "models.yaml", f"field {field}:", f"(value: {value})")


def test_dataset_n_and_batch_size_take_integers_only(tmp_path):
    text = models_with("option_order: {datasets: [{name: mmlu, n: 5.0}]}")
    refused(models_file(tmp_path, text), "models.yaml", "datasets[0]", "5.0")
    text = models_with(model="{id: m1, backend: hf, source: {path: /x}, batch_size: true}")
    refused(models_file(tmp_path, text), "models.yaml", "models[0].batch_size", "True")


@pytest.mark.parametrize(
    "old,new,field",
    [
        ("few_shot: [0, 1]", "few_shot: [0, 1.0]", "axes.few_shot[1]"),
        ("name: e\n", "name: e\nexemplar_seed: -1\n", "exemplar_seed"),
        ("name: e\n", "name: e\nseeds: 5.0\n", "seeds"),
        ("name: e\n", "name: e\ntiers: {stress: {few_shot: [true]}}\n", "tiers.stress.few_shot[0]"),
    ],
)
def test_envelope_integers(tmp_path, old, new, field):
    text = ENVELOPE.replace(old, new)
    refused(envelope_file(tmp_path, text), "envelope.yaml", f"field {field}:")


# -- 5. bounded sizes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra_audit,field,limit",
    [
        ("bootstrap: {n: 1000000000}", "audit.bootstrap.n", "100000"),
        ("items_per_dataset: 1000000000", "audit.items_per_dataset", "100000"),
        ("k: 1000", "audit.k", "64"),
        ("judges: {datasets: [arc_easy_answers], k: 100000}", "audit.judges.k", "64"),
        (
            "judges: {datasets: [arc_easy_answers], items_per_dataset: 10000000}",
            "audit.judges.items_per_dataset",
            "100000",
        ),
        (
            "decomposition: {datasets: [mmlu], items_per_dataset: 10000000}",
            "audit.decomposition.items_per_dataset",
            "100000",
        ),
        (
            "continuity: {sweeps: [numeric_comparison], sources: 1000000}",
            "audit.continuity.sources",
            "1000",
        ),
        (
            "continuity: {sweeps: [numeric_comparison], samples: 1000000}",
            "audit.continuity.samples",
            "200",
        ),
        ("odi: {num_samples: 1000000000}", "audit.odi.num_samples", "100000"),
        ("odi: {num_chains: 100000}", "audit.odi.num_chains", "64"),
        ("seed: 99999999999999999999", "audit.seed", "4294967295"),
    ],
)
def test_sizes_are_bounded(tmp_path, extra_audit, field, limit):
    text = audit_with(extra_audit)
    refused(models_file(tmp_path, text), "models.yaml", f"field {field}:", f"maximum of {limit}")


def test_dataset_and_model_sizes_are_bounded(tmp_path):
    text = models_with("option_order: {datasets: [{name: mmlu, n: 1000000000}]}")
    refused(models_file(tmp_path, text), "models.yaml", "datasets[0]", "1000000000")
    for key, limit in (("batch_size", "4096"), ("max_new_tokens", "32768")):
        model = f"{{id: m1, backend: hf, source: {{path: /x}}, {key}: 1000000000}}"
        text = models_with(model=model)
        refused(models_file(tmp_path, text), f"models[0].{key}", f"maximum of {limit}")


def test_envelope_sizes_are_bounded(tmp_path):
    for key, limit in (("items_per_benchmark", "100000"), ("seeds", "100")):
        text = ENVELOPE.replace("name: e\n", f"name: e\n{key}: 1000000000\n")
        refused(
            envelope_file(tmp_path, text), "envelope.yaml", f"field {key}:", f"maximum of {limit}"
        )


# -- 6. model ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model_id,fragments",
    [
        ('"smol\\n"', ("'smol\\n'", "does not match")),
        ('"smol\\nx"', ("'smol\\nx'",)),
        (" ".join(["m" * 300]), ("too long", "'mmmm")),
        ('"../m1"', ("'../m1'",)),
        ('""', ("''",)),
    ],
    ids=["trailing-newline", "inner-newline", "300-chars", "dot-dot-slash", "empty"],
)
def test_model_id_must_match_fully_and_be_short(tmp_path, model_id, fragments):
    text = models_with(model=f"{{id: {model_id}, backend: hf, source: {{path: /x}}}}")
    refused(models_file(tmp_path, text), "models.yaml", "field models[0].id:", *fragments)


def test_a_64_character_id_is_fine(tmp_path):
    text = models_with(model=f"{{id: {'m' * 64}, backend: hf, source: {{path: /x}}}}")
    assert list(models_file(tmp_path, text)().models) == ["m" * 64]


def test_other_patterns_match_fully_too(tmp_path):
    model = '{id: m1, backend: litellm, source: {model: x/y, api_key_env: "KEY\\n"}}'
    refused(models_file(tmp_path, models_with(model=model)), "models[0].source.api_key_env")
    text = th('{metric: "cfr@0.5\\n", facet: envelope, max: 0.2}')
    refused(thresholds_file(tmp_path, text), "default.yaml", "thresholds[0].metric")


# -- the shipped files still load ----------------------------------------------------------------


def test_shipped_configuration_loads():
    from support.paths import REPO

    from flipgate.config import load_thresholds

    cfg = load_models(REPO / "models.yaml")
    for model_id in cfg.models:
        load_thresholds(REPO / "thresholds", model_id)
    for envelope in sorted((REPO / "suites/envelope/envelopes").glob("*.yaml")):
        load_envelope(envelope, list(cfg.models))


# -- a replay file answers only the prompts it was recorded for (issue #42) ----------------------


def replay_auditor(tmp_path, k: int, backend) -> Auditor:
    """An auditor of one option_order cell (5 items) at ``k`` orderings, answered by ``backend``."""
    cfg = AuditConfig(
        tmp_path / "models.yaml",
        {
            "scripted": {
                "id": "scripted",
                "backend": "replay",
                "source": {},
                "readouts": ["regex"],
                "primary_readout": "regex",
            }
        },
        items_per_dataset=5,
        k=k,
        facets={"option_order": [DatasetSpec("arc_challenge")]},
        bootstrap_n=50,
    )
    paths = Paths(tmp_path / "trials.sqlite", None, tmp_path / "manifests", tmp_path / "models")
    auditor = Auditor(cfg, "r1", paths, progress=False)
    auditor._backends["scripted"] = backend
    return auditor


def test_a_replay_recorded_at_another_k_is_refused(tmp_path):
    """Recorded at K=6 and audited at k=4, condition c is another ordering: the replay refuses
    with one line naming the file and the mismatch instead of mapping answers back through the
    wrong ordering; at the recording's K it serves every trial."""
    recorded = replay_auditor(tmp_path / "k6", 6, ScriptedBackend())
    order_cells(recorded).measured_trials("scripted", "arc_challenge", "option_order")
    replay_file = tmp_path / "scripted.replay.jsonl"
    assert export_replay(recorded.store, replay_file, "scripted") == 5 * 6
    source = {"id": "scripted", "backend": "replay", "source": {"path": str(replay_file)}}
    same = replay_auditor(tmp_path / "same", 6, ReplayBackend(source))
    assert (
        len(order_cells(same).measured_trials("scripted", "arc_challenge", "option_order")) == 5 * 6
    )
    other = replay_auditor(tmp_path / "k4", 4, ReplayBackend(source))
    message = refused(
        lambda: order_cells(other).measured_trials("scripted", "arc_challenge", "option_order"),
        str(replay_file),
        "recorded for another prompt",
        "k, seed, grammar",
    )
    assert "'facet': 'option_order'" in message
