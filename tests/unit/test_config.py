import pytest
from support.paths import REPO, write

from flipgate import FlipgateError
from flipgate.config import load_models, load_thresholds

GOOD_MODEL = """
models:
  - id: m1
    backend: hf
    source: {path: /tmp}
"""


def test_repo_models_and_thresholds_are_valid():
    cfg = load_models(REPO / "models.yaml")
    assert "smollm2-135m-instruct" in cfg.models
    assert [d.name for d in cfg.facets["option_order"]] == ["arc_challenge"]
    assert cfg.audited("order") == [
        "smollm2-135m-instruct",
        "gemma3-270m",
        "smollm2-135m-instruct-nf4",
    ]
    assert cfg.model_caps == {
        "gemma3-270m": {"arc_challenge": 32},
        "smollm2-135m-instruct-nf4": {"arc_challenge": 16},
    }
    assert cfg.cells("gemma3-270m") == [
        ("option_order", "arc_challenge"),
        ("same_ordering:option_order", "arc_challenge"),
    ]
    assert (
        cfg.plans["odi"]["profile"] == "fast"
        and cfg.models["smollm2-135m-instruct-nf4"]["baseline"] == "smollm2-135m-instruct"
    )
    assert cfg.cells("smollm2-135m-instruct-nf4") == [
        ("option_order", "arc_challenge"),
        ("same_ordering:option_order", "arc_challenge"),
    ]
    ts = load_thresholds(REPO / "thresholds", "smollm2-135m-instruct")
    assert any(t.metric == "flip_rate" for t in ts.thresholds)
    assert {t.metric for t in ts.thresholds if t.facet == "odi"} == {"sigma_pi", "mean_abs_delta"}
    assert any(
        t.metric == "cfr@0.5" for t in ts.thresholds
    )  # '@' of CFR is not an ODI facet selector


@pytest.mark.parametrize("plan", ["release-scale", "smoke"])
def test_the_shipped_plans_are_valid_and_run_every_suite(plan):
    """plans/release-scale.yaml (the audit at release scale) and plans/smoke.yaml (CI's main-job
    step): both run every suite, with a regression between two builds of one model on llama.cpp's
    server, and find the fixtures they name (their paths are relative to the plan)."""
    cfg = load_models(REPO / "plans" / f"{plan}.yaml")
    suites = {s for m in cfg.models.values() for s in m["suites"]}
    assert suites == {"order", "envelope", "decomposition", "judges", "continuity"}
    assert cfg.models["smollm2-135m-instruct-q4-gguf"]["server"]["engine"] == "llama.cpp"
    assert cfg.models["smollm2-135m-instruct-q4-gguf"]["baseline"] == "smollm2-135m-instruct"
    assert len(cfg.audited("order")) == 4  # the ODI panel
    decomposition = cfg.plans["decomposition"]
    assert decomposition.agreement_set == REPO / "fixtures" / "judge" / "agreement.jsonl"
    assert decomposition.agreement_set.is_file() and decomposition.paraphrases.is_dir()


def test_defaults_when_audit_section_missing(tmp_path):
    cfg = load_models(write(tmp_path / "models.yaml", GOOD_MODEL))
    assert cfg.k == 6 and cfg.seed == 42 and "option_order" in cfg.facets
    assert cfg.controls["same_ordering"] == [
        ("option_order", d) for d in cfg.facets["option_order"]
    ]
    assert cfg.models["m1"]["primary_readout"] == "letter_logprob"


def test_per_dataset_n_overrides_items_per_dataset(tmp_path):
    from flipgate.calls import Auditor, Paths

    text = (
        "audit:\n  items_per_dataset: 3\n  facets:\n    option_order:\n"
        "      datasets: [mmlu, {name: arc_easy, n: 5}]\n" + GOOD_MODEL
    )
    cfg = load_models(write(tmp_path / "models.yaml", text))
    assert [(d.name, d.n) for d in cfg.facets["option_order"]] == [("mmlu", None), ("arc_easy", 5)]
    paths = Paths(tmp_path / "t.sqlite", None, tmp_path / "manifests", tmp_path / "models")
    auditor = Auditor(cfg, "r", paths, progress=False)
    assert [len(auditor.plans.items(d, "option_order")) for d in ("mmlu", "arc_easy")] == [3, 5]
    quick = Auditor(
        cfg, "r", paths, items_per_dataset=2, progress=False
    )  # --items-per-dataset wins
    assert [len(quick.plans.items(d, "option_order")) for d in ("mmlu", "arc_easy")] == [2, 2]


@pytest.mark.parametrize(
    "text,needle",
    [
        ("models:\n  - id: m1\n    backend: vllm\n    source: {path: x}\n", "models[0].backend"),
        ("models:\n  - id: m1\n    backend: hf\n", "'source' is a required property"),
        (
            "models:\n  - id: m1\n    backend: hf\n    source: {path: x}\n    batch_size: -3\n",
            "(value: -3)",
        ),
        ("models: [\n", "not valid YAML"),
        (GOOD_MODEL + "  - id: m1\n    backend: hf\n    source: {path: y}\n", "duplicate model id"),
        (
            "audit:\n  facets:\n    option_ordr: {datasets: [mmlu]}\n" + GOOD_MODEL,
            "unknown facet (value: 'option_ordr')",
        ),
        (
            "audit:\n  facets:\n    option_order: {datasets: [mmlu2]}\n" + GOOD_MODEL,
            "unknown dataset 'mmlu2'",
        ),
        (
            GOOD_MODEL + "    readouts: [regex]\n    primary_readout: letter_logprob\n",
            "primary_readout",
        ),
        (
            "audit:\n  facets:\n    option_order: {datasets: [{name: mmlu, n: 0}]}\n" + GOOD_MODEL,
            "(value: 0)",
        ),
    ],
)
def test_bad_models_file_names_file_field_value(tmp_path, text, needle):
    path = write(tmp_path / "models.yaml", text)
    with pytest.raises(FlipgateError) as err:
        load_models(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_thresholds_override_replaces_same_key(tmp_path):
    write(
        tmp_path / "default.yaml",
        """
        thresholds:
          - {metric: flip_rate, max: 0.2}
          - {metric: parse_rate, min: 0.9, rule: upper}
    """,
    )
    write(
        tmp_path / "m1.yaml",
        """
        on_inconclusive: xfail
        thresholds:
          - {metric: flip_rate, max: 0.6, rule: point}
    """,
    )
    ts = load_thresholds(tmp_path, "m1")
    by_metric = {t.metric: t for t in ts.thresholds}
    assert by_metric["flip_rate"].bound == 0.6 and by_metric["flip_rate"].rule == "point"
    assert by_metric["parse_rate"].bound == 0.9
    assert ts.on_inconclusive == "xfail"
    assert load_thresholds(tmp_path, "other").on_inconclusive == "by_rule"


@pytest.mark.parametrize(
    "text,needle",
    [
        ("thresholds:\n  - {metric: flip_rat, max: 0.2}\n", "thresholds[0].metric"),
        ("thresholds:\n  - {metric: flip_rate, max: 0.2, rule: strict}\n", "(value: 'strict')"),
        (
            "thresholds:\n  - {metric: flip_rate, max: 0.2, facet: colour_order}\n",
            "unknown facet (value: 'colour_order')",
        ),
        ("thresholds:\n  - {metric: flip_rate}\n", "thresholds[0]"),
    ],
)
def test_bad_thresholds_file(tmp_path, text, needle):
    write(tmp_path / "default.yaml", text)
    with pytest.raises(FlipgateError) as err:
        load_thresholds(tmp_path, "m1")
    assert "default.yaml" in str(err.value) and needle in str(err.value)


def test_threshold_without_facet_skips_controls(tmp_path):
    write(tmp_path / "default.yaml", "thresholds:\n  - {metric: flip_rate, max: 0.2}\n")
    ts = load_thresholds(tmp_path, "m")
    assert ts.for_cell("option_order", "mmlu") and not ts.for_cell(
        "same_ordering:option_order", "mmlu"
    )


@pytest.mark.parametrize(
    "threshold,message",
    [
        # a facet metric takes no '@' part: it would select nothing
        ("{metric: flip_rate@paraphrase, facet: option_order, max: 0.5}", "takes no '@' part"),
        ("{metric: tau_r@x, facet: envelope, min: 0.5}", "'tau_r@x' is not valid"),  # schema
        ("{metric: sigma_pi@colour_order, facet: odi, max: 0.5}", "unknown facet after '@'"),
        ("{metric: artifact@label_sets, facet: decomposition, max: 0.5}", "unknown axis after '@'"),
        ("{metric: cfr, facet: envelope, max: 0.5}", "field thresholds[0].metric"),  # cfr@θ only
        (
            "{metric: consensus_gain, facet: judges, max: 1.5}",
            "outside the range of consensus_gain",
        ),
        ("{metric: delta_flip_rate, max: 0.1}", "go with vs: baseline and only they do"),
        ("{metric: sdi, facet: odi, max: 0.1}", "envelope metrics (sdi, cfr,"),
    ],
)
def test_thresholds_are_checked_against_the_suites_metric_specs(tmp_path, threshold, message):
    """Every suite declares its metrics (range, what may follow '@', its facet or vs:); the
    thresholds files are checked against those declarations alone."""
    write(tmp_path / "default.yaml", f"thresholds:\n  - {threshold}\n")
    with pytest.raises(FlipgateError) as err:
        load_thresholds(tmp_path, "m1")
    assert str(err.value).startswith(str(tmp_path / "default.yaml")), str(err.value)
    assert message in str(err.value), str(err.value)


def test_the_thresholds_schema_takes_every_suites_metrics():
    from flipgate import registry
    from flipgate.config import _schema

    metric = _schema("thresholds")["properties"]["thresholds"]["items"]["properties"]["metric"]
    names = set(metric["anyOf"][0]["enum"])
    for suite in registry.suites():
        for spec in suite.metrics:
            assert spec.at == "number" or spec.name in names, (suite.name, spec.name)
    patterns = [p["pattern"] for p in metric["anyOf"][1:]]
    assert r"^cfr@(0(\.[0-9]+)?|1(\.0+)?)$" in patterns and "^sigma_pi@[a-z0-9_]+$" in patterns


def test_a_suites_former_names_are_read_as_its_name(tmp_path):
    """suites: [readouts] is the decomposition suite (its name before), facet: judge the judges
    suite's cells; listing a suite under both names lists it once."""
    text = (
        "audit:\n"
        "  decomposition: {datasets: [basic_arithmetic], axes: [option_order]}\n"
        "  judges: {datasets: [arc_easy_answers]}\n"
        "models:\n"
        "  - {id: m1, backend: hf, source: {path: /tmp}, suites: [order, readouts, judges]}\n"
        "  - {id: m2, backend: hf, source: {path: /tmp}, suites: [readouts, decomposition]}\n"
    )
    cfg = load_models(write(tmp_path / "models.yaml", text))
    assert cfg.models["m1"]["suites"] == ["order", "decomposition", "judges"]
    assert cfg.models["m2"]["suites"] == ["decomposition"]
    assert cfg.audited("decomposition") == ["m1", "m2"]
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        "thresholds:\n"
        "  - {metric: judge_flip_rate, facet: judge, max: 0.25}\n"
        "  - {metric: consensus_gain, facet: judges, min: -0.05}\n",
    )
    assert [(t.metric, t.facet) for t in load_thresholds(thresholds.parent, "m1").thresholds] == [
        ("judge_flip_rate", "judges"),
        ("consensus_gain", "judges"),
    ]
    write(thresholds, "thresholds:\n  - {metric: flip_rate, facet: judge, max: 0.25}\n")
    with pytest.raises(FlipgateError, match="go with facet: judges and only they do"):
        load_thresholds(thresholds.parent, "m1")
