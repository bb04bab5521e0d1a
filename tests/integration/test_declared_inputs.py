"""Every declared input is used or refused (issue #60, class 3): an empty collection is not read
as the default, one dataset name has one source, a thresholds file the loader would not read is
named, a replay file holds one answer per trial, baselines end, and a dataset its facet filter
leaves empty is one clean line, never a ValueError from deep inside. Each refusal is one line
naming the file, the field and the value, with the usage status (4); run in-process as
tests/integration/test_bad_input.py does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.bad_input import THRESHOLDS, Case, models_with, run_in_process, th
from support.paths import REPO

from flipgate import FlipgateError
from flipgate.exitcodes import USAGE_ERROR

MODEL = "{id: m1, backend: hf, source: {path: /nonexistent}, readouts: [regex]}"


def roster(*models: str, audit: str = "facets:\n    option_order: {datasets: [mmlu]}") -> str:
    """A models.yaml of ``models`` (flow mappings) under an ``audit:`` body (indented by 2)."""
    return f"audit:\n  items_per_dataset: 2\n  {audit}\nmodels:\n" + "".join(
        f"  - {m}\n" for m in models
    )


def hf(model_id: str, extra: str = "") -> str:
    return f"{{id: {model_id}, backend: hf, source: {{path: /x}}, readouts: [regex]{extra}}}"


def assert_clean(status: int, text: str, *fragments: str, expected: int = USAGE_ERROR) -> None:
    assert status == expected, text[-3000:]
    assert "Traceback" not in text and 'File "' not in text, text[-3000:]
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text[-3000:]}"


# --- an empty collection declares nothing: it is refused, not read as the default ---------------

EMPTY = [
    Case(
        "facets-empty-mapping",
        models=roster(MODEL, audit="facets: {}"),
        expect=("models.yaml", "field audit.facets", "{}", "not read as the default"),
    ),
    Case(
        "controls-empty-mapping",
        models=models_with(extra_audit="controls: {}"),
        expect=("models.yaml", "field audit.controls", "{}", "not read as the default"),
    ),
    Case(
        "facet-datasets-empty-list",
        models=models_with("option_order: {datasets: []}"),
        expect=("models.yaml", "audit.facets.option_order.datasets", "[]", "declares nothing"),
    ),
    Case(
        "control-facets-empty-list",
        models=models_with(extra_audit="controls: {same_ordering: {facets: []}}"),
        expect=("models.yaml", "audit.controls.same_ordering.facets", "[]", "declares nothing"),
    ),
    Case(
        "model-datasets-empty-list",
        models=models_with(model=hf("m1", ", datasets: []")),
        expect=("models.yaml", "models[0].datasets", "[]", "declares nothing"),
    ),
    Case(
        "model-readouts-empty-list",
        models=models_with(model="{id: m1, backend: hf, source: {path: /x}, readouts: []}"),
        expect=("models.yaml", "models[0].readouts", "[]", "declares nothing"),
    ),
]

# --- one dataset name, one source -------------------------------------------------------------

REPEATED = [
    Case(
        "two-data-files-one-facet",
        models=models_with(
            "option_order: {datasets: [{name: mmlu_pro, data_files: /d/a.jsonl}, "
            "{name: mmlu_pro, data_files: /d/b.jsonl}]}"
        ),
        expect=(
            "models.yaml",
            "audit.facets.option_order.datasets[1]",
            "'mmlu_pro'",
            "/d/a.jsonl",
            "/d/b.jsonl",
        ),
    ),
    Case(
        "two-data-files-two-facets",
        models=models_with(
            "option_order: {datasets: [{name: mmlu_pro, data_files: /d/a.jsonl}]}\n"
            "    image_set_order: {datasets: [{name: mmlu_pro, data_files: /d/b.jsonl}]}"
        ),
        expect=("models.yaml", "audit.facets.image_set_order.datasets[0]", "/d/a.jsonl", "/d/b"),
    ),
    Case(
        "hub-and-local-copy",
        models=models_with(
            "option_order: {datasets: [mmlu_pro, {name: mmlu_pro, data_files: /d/b.jsonl}]}"
        ),
        expect=("datasets[1]", "'mmlu_pro'", "its default source", "/d/b.jsonl"),
    ),
    Case(
        "two-caps-one-name",
        models=models_with("option_order: {datasets: [{name: mmlu, n: 5}, {name: mmlu, n: 9}]}"),
        expect=("models.yaml", "audit.facets.option_order.datasets[1]", "n: 5", "n: 9"),
    ),
    Case(
        "same-dataset-listed-twice",
        models=models_with("option_order: {datasets: [mmlu, arc_challenge, mmlu]}"),
        expect=("models.yaml", "audit.facets.option_order.datasets[2]", "'mmlu'", "twice"),
    ),
    Case(
        "model-caps-one-dataset-twice",
        models=models_with(model=hf("m1", ", datasets: [mmlu, {name: mmlu, n: 1}]")),
        expect=("models.yaml", "models[0].datasets[1]", "'mmlu'", "n: 1"),
    ),
    Case(
        "suite-datasets-two-splits",
        models=models_with(
            extra_audit="judges: {datasets: [{name: judgebench, split: claude}, "
            "{name: judgebench, split: gpt}]}"
        ),
        expect=("models.yaml", "audit.judges.datasets[1]", "'judgebench'", "claude", "gpt"),
    ),
]

# --- baselines end ------------------------------------------------------------------------------

CYCLES = [
    Case(
        "own-baseline",
        models=roster(hf("a", ", baseline: a")),
        expect=("models.yaml", "models[0].baseline", "cycle (a → a)", "'a'"),
    ),
    Case(
        "two-model-cycle",
        models=roster(hf("a", ", baseline: b"), hf("b", ", baseline: a")),
        expect=("models.yaml", "models[0].baseline", "cycle (a → b → a)"),
    ),
    Case(
        "three-model-cycle",
        models=roster(hf("c", ", baseline: b"), hf("a", ", baseline: c"), hf("b", ", baseline: a")),
        expect=("models.yaml", "models[0].baseline", "cycle (c → b → a → c)"),
    ),
    Case(  # d's chain runs into the cycle: the cycle is named, not d
        "chain-into-cycle",
        models=roster(hf("d", ", baseline: a"), hf("a", ", baseline: b"), hf("b", ", baseline: a")),
        expect=("models.yaml", "models[1].baseline", "cycle (a → b → a)"),
    ),
]

# --- a thresholds file the loader would not read --------------------------------------------------

UNREAD = {
    "override-in-subfolder": "release/m1.yaml",
    "default-in-subfolder": "release/default.yaml",
    "deep-subfolder-yml": "a/b/m1.yml",
    "yml-extension": "m1.yml",
    "upper-case-extension": "m1.YAML",
}


@pytest.mark.parametrize("case", EMPTY + REPEATED + CYCLES, ids=lambda c: c.id)
def test_declared_input_refused(case, tmp_path, capsys):
    status, text = run_in_process(tmp_path, case, capsys)
    assert_clean(status, text, *case.expect)


@pytest.mark.parametrize("name", UNREAD.values(), ids=UNREAD.keys())
def test_thresholds_file_not_read_is_refused(name, tmp_path, capsys):
    tdir = tmp_path / "project-thresholds"
    (tdir / name).parent.mkdir(parents=True)
    (tdir / "default.yaml").write_text(THRESHOLDS)
    (tdir / name).write_text(th("{metric: flip_rate, max: 0.01}"))
    case = Case("unread", args=("--thresholds", str(tdir)))
    status, text = run_in_process(tmp_path, case, capsys)
    assert_clean(status, text, str(tdir / name), "would not be read")


def test_other_files_beside_thresholds_are_no_error(tmp_path, capsys):
    """Only YAML files are thresholds: notes and a README (in a subfolder too) are left alone."""
    tdir = tmp_path / "project-thresholds"
    (tdir / "notes").mkdir(parents=True)
    (tdir / "default.yaml").write_text(THRESHOLDS)
    (tdir / "README.md").write_text("why these bounds\n")
    (tdir / "notes" / "2024.txt").write_text("release notes\n")
    status, text = run_in_process(tmp_path, Case("ok", args=("--thresholds", str(tdir))), capsys)
    assert_clean(status, text, expected=0)


@pytest.mark.parametrize(
    "models",
    [
        roster(hf("a"), hf("b", ", baseline: a"), hf("c", ", baseline: b")),  # a chain that ends
        models_with(extra_audit="controls: {same_ordering: {}}"),  # a control with its defaults
        models_with(  # one dataset on two facets, declared the same way: one dataset
            "option_order: {datasets: [{name: mmlu, n: 2}]}\n"
            "    image_set_order: {datasets: [{name: mmlu, n: 2}]}"
        ),
        models_with("option_order: {datasets: [{name: mmlu_pro, data_files: [/d/a, /d/b]}]}"),
    ],
    ids=["baseline-chain", "control-defaults", "same-dataset-two-facets", "data-files-list"],
)
def test_declared_input_accepted(models, tmp_path, capsys):
    status, text = run_in_process(tmp_path, Case("ok", models=models), capsys)
    assert_clean(status, text, expected=0)


@pytest.mark.parametrize(
    "benchmarks,fragment",
    [
        ("  - {name: openbookqa, n: 4}\n  - {name: openbookqa, n: 8}\n", "n: 4"),
        ("  - arc_easy\n  - openbookqa\n  - arc_easy\n", "twice"),
    ],
    ids=["two-caps", "listed-twice"],
)
def test_envelope_benchmark_declared_twice_is_refused(tmp_path, benchmarks, fragment):
    """An envelope file's benchmarks are the same class: one name, one source."""
    from flipgate.envelope.spec import load_envelope

    shipped = (REPO / "suites/envelope/envelopes/default.yaml").read_text()
    head, _, tail = shipped.partition("benchmarks:\n")
    path = tmp_path / "envelope.yaml"
    path.write_text(head + "benchmarks:\n" + benchmarks + tail.split("\n", 2)[2])
    with pytest.raises(FlipgateError, match=r"field benchmarks\[[12]\]") as err:
        load_envelope(path, ["m1"])
    assert str(path) in str(err.value) and fragment in str(err.value)


def test_empty_judge_consensus_turns_it_on(tmp_path):
    """``judge_consensus: {}`` declares the consensus with its defaults (it was read as off)."""
    from flipgate.config import load_models

    (tmp_path / "models.yaml").write_text(models_with(extra_audit="judge_consensus: {}"))
    settings = load_models(tmp_path / "models.yaml").judge_consensus
    assert settings is not None and settings.k == 6


# --- a replay file holds one answer per trial --------------------------------------------------


def _record(**fields) -> str:
    trial = {"dataset": "mmlu", "item_id": "mmlu/1", "facet": "option_order", "condition": 0}
    return json.dumps({**trial, "sample": 0, "text": " A", **fields}) + "\n"


@pytest.mark.parametrize(
    "second,differ",
    [
        (_record(text=" B"), "text"),
        (_record(label_logprobs={"A": -0.1}), "label_logprobs"),
        (_record(prompt_sha256="ab" * 32), "prompt_sha256"),
        (_record(text=" C", tokens_out=3), "text, tokens_out"),
    ],
    ids=["text", "logprobs", "prompt", "two-fields"],
)
def test_conflicting_replay_records_are_refused(tmp_path, second, differ):
    from flipgate.backends.replay import ReplayBackend

    path = tmp_path / "m.jsonl"
    path.write_text(_record() + _record(condition=1) + second)
    with pytest.raises(FlipgateError) as err:
        ReplayBackend({"id": "m", "source": {"path": str(path)}})
    message = str(err.value)
    assert str(path) in message and "line 3" in message and "line 1" in message
    assert "'item_id': 'mmlu/1'" in message and f"another {differ};" in message


def test_identical_replay_records_are_one(tmp_path):
    from flipgate.backends.replay import ReplayBackend

    path = tmp_path / "m.jsonl"
    path.write_text(_record(label_logprobs={"A": float("nan")}) * 2 + _record(condition=1))
    assert len(ReplayBackend({"id": "m", "source": {"path": str(path)}}).records) == 2


@pytest.mark.parametrize(
    "line,why",
    [
        (_record(item_id=["mmlu/1"]), "unhashable"),
        (_record(tokens_in="many"), "invalid literal"),
        ("[1, 2]\n", "not a replay record"),
    ],
    ids=["list-as-id", "text-as-count", "not-a-mapping"],
)
def test_malformed_replay_record_is_one_line(tmp_path, line, why):
    from flipgate.backends.replay import ReplayBackend

    path = tmp_path / "m.jsonl"
    path.write_text(_record() + line)
    with pytest.raises(FlipgateError, match="line 2: not a replay record") as err:
        ReplayBackend({"id": "m", "source": {"path": str(path)}})
    assert why in str(err.value)


def test_conflicting_replay_ends_the_run_with_usage_status(tmp_path, capsys):
    path = tmp_path / "m1.jsonl"
    path.write_text(_record() + _record(text=" B"))
    case = Case(
        "replay",
        models=models_with(model=f"{{id: m1, backend: replay, source: {{path: {path}}}}}"),
    )
    status, text = run_in_process(
        tmp_path, case, capsys, str(REPO / "suites/order/test_option_order.py"), collect_only=False
    )
    assert_clean(status, text, str(path), "line 2", "another text")


# --- a dataset its facet filter leaves empty ---------------------------------------------------


def _mmlu_pro(path: Path, options_per_row: list[int]) -> Path:
    rows = [
        {"question_id": i, "question": f"q{i}", "options": [f"o{j}" for j in range(n)]}
        | {"answer_index": 0, "category": "x"}
        for i, n in enumerate(options_per_row)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


UNUSABLE = {  # dataset (data_files rows' option counts, or a bundled one), facet -> why
    "one-option": ([1, 1, 1], "option_order", "every one of its 3 items has fewer than 2 options"),
    "27-options": ([27, 27], "option_order", "has more than 26 options"),
    "1-or-27-options": ([1, 27, 1], "option_order", "fewer than 2 or more than 26 options"),
    "passages-for-options": ("synthetic_multihop", "option_order", "fewer than 2 options"),
    "options-for-passages": ("mmlu", "evidence_chunk_order", "has the units that facet"),
}


@pytest.mark.parametrize("fixed_n", [False, True], ids=["sequential", "fixed-n"])
@pytest.mark.parametrize("rows,facet,why", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_dataset_without_usable_items_is_one_line(tmp_path, capsys, rows, facet, why, fixed_n):
    if isinstance(rows, str):
        dataset, shown = rows, f"'{rows}' (its default source)"
    else:
        data = _mmlu_pro(tmp_path / "rows.jsonl", rows)
        dataset, shown = f"{{name: mmlu_pro, data_files: {data}}}", str(data)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    case = Case(
        "unusable",
        models=models_with(
            f"{facet}: {{datasets: [{dataset}]}}",
            model=f"{{id: m1, backend: replay, source: {{path: {empty}}}, readouts: [regex]}}",
        ),
        thresholds=th(
            "{metric: flip_rate, max: 0.25}",
            "{metric: flip_rate_same, max: 0.25, facet: same_ordering}",
        ),
        args=("--fixed-n",) if fixed_n else (),
    )
    test = "test_option_order.py" if facet == "option_order" else f"test_{facet}.py"
    status, text = run_in_process(
        tmp_path, case, capsys, str(REPO / "suites" / "order" / test), collect_only=False
    )
    assert_clean(status, text, "models.yaml", f"audit.facets.{facet}.datasets[0]", shown, why)
    assert "Looks" not in text and "ValueError" not in text


def test_sequential_cell_of_no_items_is_a_flipgate_error():
    """The last guard: however a cell came to have no items, it never reaches the look grid."""
    from flipgate.gate.sequential import run_sequential
    from flipgate.metrics.sequential import SequentialSettings

    with pytest.raises(FlipgateError, match="has no items to draw"):
        run_sequential(
            SequentialSettings(), 0, [], "regex", lambda n: {}, model_id="m", dataset="d", cell="c"
        )
