"""Bad input, as a user meets it: every malformed models.yaml, thresholds file, CLI option and
dataset row ends the run with one clean message naming the file and field, a usage status (4),
and no traceback. The suite runs in-process (``pytest.main``) on the real ``suites/``."""

from __future__ import annotations

import pytest
from support.bad_input import MODELS, THRESHOLDS, Case, models_with, run_in_process, th
from support.paths import REPO

from flipgate.exitcodes import USAGE_ERROR

CASES = [
    # models.yaml
    Case(
        "models-not-utf8",
        models=b"audit: {k: 6}\nmodels:\n  - {id: m\xff1}\n",
        expect=("models.yaml", "UTF-8"),
    ),
    Case(
        "models-bad-yaml", models="models: [\n  - {id: m1", expect=("models.yaml", "not valid YAML")
    ),
    Case(
        "models-missing-models",
        models="audit: {k: 6}\n",
        expect=("models.yaml", "'models' is a required"),
    ),
    Case("models-not-a-list", models="models: m1\n", expect=("models.yaml", "field models")),
    Case(  # dtype: auto, float32, bfloat16 (and their short names), nothing else
        "dtype-unknown",
        models=models_with(
            model="{id: m1, backend: hf, source: {path: /nonexistent}, dtype: float16}"
        ),
        expect=("models.yaml", "dtype", "float16"),
    ),
    Case(
        "unknown-facet",
        models=models_with("option_ordr: {datasets: [mmlu]}"),
        expect=("models.yaml", "audit.facets.option_ordr", "unknown facet"),
    ),
    Case(
        "unknown-dataset",
        models=models_with("option_order: {datasets: [mmluu]}"),
        expect=("models.yaml", "audit.facets.option_order.datasets[0]", "mmluu"),
    ),
    Case(
        "duplicate-model-id",
        models=MODELS + "  - {id: m1, backend: hf, source: {path: /x}}\n",
        expect=("models.yaml", "models[1].id", "duplicate"),
    ),
    Case(
        "primary-not-in-readouts",
        models=models_with(
            model="{id: m1, backend: hf, source: {path: /x}, readouts: [regex], "
            "primary_readout: letter_logprob}"
        ),
        expect=("models.yaml", "models[0].primary_readout", "letter_logprob"),
    ),
    Case(
        "sequential-batch-zero",
        models=models_with(extra_audit="sequential: {batch_items: 0}"),
        expect=("models.yaml", "audit.sequential", "0"),
    ),
    Case(
        "sequential-unknown-key",
        models=models_with(extra_audit="sequential: {min_item: 16}"),
        expect=("models.yaml", "audit.sequential", "min_item"),
    ),
    Case(
        "k-too-small",
        models=models_with(extra_audit="k: 1"),
        expect=("models.yaml", "audit.k", "1"),
    ),
    Case(
        "items-per-dataset-zero",
        # its own items_per_dataset, not a second one (a duplicate key is refused as such)
        models=models_with(extra_audit="items_per_dataset: 0").replace(
            "  items_per_dataset: 2\n", "", 1
        ),
        expect=("models.yaml", "audit.items_per_dataset"),
    ),
    Case(
        "unknown-backend",
        models=models_with(model="{id: m1, backend: onnx, source: {path: /x}}"),
        expect=("models.yaml", "models[0].backend", "onnx"),
    ),
    Case(
        "dataset-n-zero",
        models=models_with("option_order: {datasets: [{name: mmlu, n: 0}]}"),
        expect=("models.yaml", "datasets[0].n", "0"),
    ),
    Case(
        "data-files-on-bundled-arc",
        models=models_with(
            "option_order: {datasets: [{name: arc_challenge, data_files: /nonexistent.jsonl}]}"
        ),
        expect=("models.yaml", "'data_files'", "arc_challenge", "/nonexistent.jsonl"),
    ),
    Case(
        "data-files-on-mmlu",
        models=models_with("option_order: {datasets: [{name: mmlu, data_files: /x.parquet}]}"),
        expect=("models.yaml", "'data_files'", "mmlu", "split"),
    ),
    Case(
        "loader-option-typo",
        models=models_with("option_order: {datasets: [{name: mmlu_pro, data_file: /x}]}"),
        expect=("models.yaml", "'data_file'", "data_files"),
    ),
    Case(
        "control-facet-undeclared",
        models=models_with(
            extra_audit="controls: {same_ordering: {facets: [document_rank_order]}}"
        ),
        expect=("models.yaml", "audit.controls.same_ordering.facets[0]", "document_rank_order"),
    ),
    Case(
        "control-dataset-undeclared",
        models=models_with(extra_audit="controls: {same_ordering: {datasets: [arc_challenge]}}"),
        expect=("models.yaml", "audit.controls.same_ordering.datasets[0]", "arc_challenge"),
    ),
    Case(
        "unknown-control",
        models=models_with(extra_audit="controls: {same_order: {}}"),
        expect=("models.yaml", "audit.controls.same_order", "unknown control"),
    ),
    Case(
        "judge-unknown",
        models=models_with(extra_audit="judge: gpt-judge"),
        expect=("models.yaml", "audit.judge", "gpt-judge"),
    ),
    Case(
        "bootstrap-level-out-of-range",
        models=models_with(extra_audit="bootstrap: {level: 1.5}"),
        expect=("models.yaml", "audit.bootstrap.level", "1.5"),
    ),
    Case(
        "odi-profile-unknown",
        models=models_with(extra_audit="odi: {profile: fastest}"),
        expect=("models.yaml", "audit.odi.profile", "fastest"),
    ),
    Case(
        "model-missing-source",
        models=models_with(model="{id: m1, backend: hf}"),
        expect=("models.yaml", "models[0]", "source"),
    ),
    # thresholds files
    Case(
        "thresholds-not-utf8",
        thresholds=b'thresholds:\n  - {metric: flip_rate, max: 0.2, why: "caf\xe9"}\n',
        expect=("default.yaml", "UTF-8", "offset"),
    ),
    Case(
        "thresholds-bad-yaml",
        thresholds="thresholds: [\n",
        expect=("default.yaml", "not valid YAML"),
    ),
    Case("thresholds-missing-default", thresholds=None, expect=("default.yaml", "file not found")),
    Case(
        "dataset-typo",
        thresholds=th("{metric: flip_rate, dataset: mmluu, max: 0.25}"),
        expect=("default.yaml", "thresholds[0]", "mmluu", "selects no cell", "option_order × mmlu"),
    ),
    Case(
        "facet-not-audited",
        thresholds=th("{metric: flip_rate, facet: evidence_chunk_order, max: 0.25}"),
        expect=("default.yaml", "thresholds[0]", "evidence_chunk_order", "selects no cell"),
    ),
    Case(
        "facet-unknown",
        thresholds=th("{metric: flip_rate, facet: option_ordr, max: 0.25}"),
        expect=("default.yaml", "thresholds[0].facet", "option_ordr"),
    ),
    Case(
        "readout-not-given",
        thresholds=th("{metric: flip_rate, readout: letter_logprob, max: 0.25}"),
        expect=("default.yaml", "thresholds[0]", "letter_logprob", "selects no cell"),
    ),
    Case(
        "control-dataset-typo",
        thresholds=th("{metric: delta_order, facet: same_ordering, dataset: arc, max: 0.2}"),
        expect=("default.yaml", "thresholds[0]", "dataset='arc'"),
    ),
    Case(
        "bound-above-range",
        thresholds=th("{metric: flip_rate, max: 25}"),
        expect=("default.yaml", "thresholds[0].max", "25", "[0, 1]"),
    ),
    Case(
        "bound-below-range",
        thresholds=th("{metric: flip_rate, max: -0.1}"),
        expect=("default.yaml", "thresholds[0].max", "-0.1"),
    ),
    Case(
        "bound-nan",
        thresholds=th("{metric: flip_rate, max: .nan}"),
        expect=("default.yaml", "thresholds[0].max", "finite"),
    ),
    Case(
        "bound-inf",
        thresholds=th("{metric: parse_rate, min: -.inf}"),
        expect=("default.yaml", "thresholds[0].min", "finite"),
    ),
    Case(
        "bound-string",
        thresholds=th("{metric: flip_rate, max: high}"),
        expect=("default.yaml", "thresholds[0].max", "high"),
    ),
    Case(
        "both-max-and-min",
        thresholds=th("{metric: flip_rate, max: 0.2, min: 0.1}"),
        expect=("default.yaml", "thresholds[0]"),
    ),
    Case(
        "unknown-metric",
        thresholds=th("{metric: flip_rat, max: 0.2}"),
        expect=("default.yaml", "thresholds[0].metric", "flip_rat"),
    ),
    Case(
        "unknown-rule",
        thresholds=th("{metric: flip_rate, max: 0.2, rule: strict}"),
        expect=("default.yaml", "thresholds[0].rule", "strict"),
    ),
    Case(
        "unknown-key",
        thresholds=th("{metric: flip_rate, maxx: 0.2}"),
        expect=("default.yaml", "thresholds[0]", "maxx"),
    ),
    Case(
        "on-inconclusive-unknown",
        thresholds=th("{metric: flip_rate, max: 0.2}", head="on_inconclusive: ignore\n"),
        expect=("default.yaml", "on_inconclusive", "ignore"),
    ),
    Case(
        "level-zero",
        thresholds=th("{metric: flip_rate, max: 0.2}", head="level: 0\n"),
        expect=("default.yaml", "level", "0"),
    ),
    Case(
        "threshold-level-above-one",
        thresholds=th("{metric: flip_rate, max: 0.2, level: 95}"),
        expect=("default.yaml", "thresholds[0].level", "95"),
    ),
    Case(
        "override-for-unknown-model",
        extra_files={"m2.yaml": THRESHOLDS},
        expect=("m2.yaml", "override file", "'m2'", "m1"),
    ),
    Case(
        "override-selector-typo",
        extra_files={"m1.yaml": th("{metric: flip_rate, dataset: arc_challenge, max: 0.1}")},
        expect=("m1.yaml", "thresholds[0]", "arc_challenge", "selects no cell"),
    ),
    Case(
        "model-selector-unknown",
        thresholds=th("{metric: flip_rate, model: m9, max: 0.2}"),
        expect=("default.yaml", "thresholds[0]", "model", "m9"),
    ),
    Case(
        "conflicting-duplicates",
        thresholds=th("{metric: flip_rate, max: 0.2}", "{metric: flip_rate, max: 0.3}"),
        expect=("default.yaml", "thresholds[1]", "conflicts with thresholds[0]"),
    ),
    Case(
        "envelope-metric-on-facet",
        thresholds=th("{metric: sdi, max: 0.5}"),
        expect=("default.yaml", "thresholds[0]", "sdi"),
    ),
    Case(
        "control-metric-without-control",
        thresholds=th("{metric: delta_order, max: 0.2}"),
        expect=("default.yaml", "thresholds[0].facet", "delta_order", "same_ordering"),
    ),
    Case(
        "odi-metric-on-facet",
        thresholds=th("{metric: sigma_pi, facet: option_order, max: 0.5}"),
        expect=("default.yaml", "thresholds[0]", "sigma_pi"),
    ),
    Case(
        "cfr-theta-out-of-range",
        thresholds=th("{metric: cfr@2, facet: envelope, max: 0.2}"),
        expect=("default.yaml", "thresholds[0].metric", "cfr@2"),
    ),
    # command-line options
    Case(
        "items-per-dataset-option-zero",
        args=("--items-per-dataset", "0"),
        expect=("--items-per-dataset", "0"),
    ),
    Case(
        "items-per-dataset-option-negative",
        args=("--items-per-dataset", "-1"),
        expect=("--items-per-dataset", "-1"),
    ),
    Case(
        "models-option-missing-file",
        args=("--models", "/nonexistent/models.yaml"),
        expect=("/nonexistent/models.yaml", "file not found"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_clean_usage_error(case, tmp_path, capsys):
    status, text = run_in_process(tmp_path, case, capsys)
    assert status == case.status, text[-3000:]
    assert "Traceback" not in text and 'File "' not in text, text[-3000:]
    for fragment in case.expect:
        assert fragment in text, f"{fragment!r} not in:\n{text[-3000:]}"


def test_sweep_is_large_enough():
    assert len(CASES) >= 40


def test_a_k_deselection_is_not_an_error(tmp_path, capsys):
    """A threshold on a dataset that ``-k`` deselects still matches the plan: no error."""
    case = Case(
        "k-deselect",
        models=models_with("option_order: {datasets: [mmlu, arc_challenge]}"),
        thresholds=th("{metric: flip_rate, dataset: arc_challenge, max: 0.25}"),
        args=("-k", "mmlu"),
    )
    status, text = run_in_process(tmp_path, case, capsys)
    assert status == 0, text[-3000:]
    assert "m1-mmlu" in text and "arc_challenge" not in text.split("deselected")[0].split("\n")[-1]


def test_suites_the_plan_does_not_run_leave_their_thresholds_inert(tmp_path, capsys):
    """The default thresholds name envelope and ODI gates; a plan without an envelope is not an
    error."""
    case = Case("no-envelope", thresholds=(REPO / "thresholds" / "default.yaml").read_text())
    status, text = run_in_process(tmp_path, case, capsys)
    assert status == 0, text[-3000:]


def test_thresholds_of_suites_not_run_are_noted(tmp_path):
    from support.plans import threshold_plan

    from flipgate.config import load_models
    from flipgate.suite.threshold_coverage import check_thresholds

    only_order = MODELS.replace("readouts: [regex]}", "readouts: [regex], suites: [order]}")
    (tmp_path / "models.yaml").write_text(only_order)
    cfg = load_models(tmp_path / "models.yaml")
    notes = check_thresholds(REPO / "thresholds", cfg, *threshold_plan(cfg))  # no envelope roster
    suites = ("no envelope", "no regression", "no decomposition", "no judges", "no continuity")
    assert notes and all(any(s in n for s in suites) for n in notes)
    assert any("rho_flip_max" in n for n in notes) and any("delta_flip_rate" in n for n in notes)


@pytest.mark.parametrize(
    "field,value,match", [("options", None, "options"), ("answer_index", 99, "answer_index")]
)
def test_bad_dataset_row_fails_with_file_row_and_field(tmp_path, capsys, field, value, match):
    """A hub dataset read from local files (``data_files``) with a bad row: the cell stops with a
    message naming the file, the row and the field; the run ends with the usage status."""
    import pandas as pd

    rows = [
        {
            "question_id": i,
            "question": f"q{i}",
            "options": ["a", "b", "c", "d"],
            "answer_index": 1,
            "category": "x",
        }
        for i in range(3)
    ]
    rows[1][field] = value
    data = tmp_path / "mmlu_pro.parquet"
    pd.DataFrame(rows).to_parquet(data)
    case = Case(
        "bad-row",
        models=models_with(f"option_order: {{datasets: [{{name: mmlu_pro, data_files: {data}}}]}}"),
    )
    status, text = run_in_process(
        tmp_path,
        case,
        capsys,
        str(REPO / "suites" / "order" / "test_option_order.py"),
        collect_only=False,
    )
    assert status == USAGE_ERROR, text[-3000:]
    assert str(data) in text and "row 1" in text and match in text, text[-3000:]
    assert "Traceback" not in text
