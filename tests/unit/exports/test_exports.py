"""``python -m flipgate export``: GRID cards as Hugging Face ``.eval_results`` files and as Every
Eval Ever logs, read back with those formats' own packages (huggingface_hub's
``parse_eval_result_entries``; every_eval_ever's ``EvaluationLog`` and validator) and checked
against the cards' numbers."""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import pytest
import yaml
from huggingface_hub import parse_eval_result_entries
from support.auditors import make_auditor
from support.scripted import ScriptedBackend
from support.suites import SUITES

from flipgate.cards import write_cards
from flipgate.exitcodes import USAGE_ERROR
from flipgate.items import DatasetSpec
from flipgate.order.measure import order_cells

MODEL = "acme/tiny"
DATASETS = ("arc_challenge", "mmlu", "mmlu_philosophy")  # the last has no Hub benchmark


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    """``grid_cards/`` as an audit of one model (an org/name id) on three datasets leaves it."""
    tmp = tmp_path_factory.mktemp("audit")
    auditor = make_auditor(tmp / "run", ScriptedBackend())
    auditor.config.models[MODEL] = {**auditor.config.models["scripted"], "id": MODEL}
    auditor._backends[MODEL] = ScriptedBackend(MODEL)
    auditor.store.add_model(
        MODEL,
        {"backend": "hf", "weights_sha256": "abc", "dtype": "bfloat16", "quantization": "q8_0"},
        {"readouts": ["letter_logprob", "regex"], "primary_readout": "regex"},
    )
    for dataset in DATASETS[1:]:
        auditor.config.facets["option_order"].append(DatasetSpec(dataset))
    for dataset in DATASETS:
        order_cells(auditor).trials(MODEL, dataset, "option_order")
    order_cells(auditor).trials(MODEL, "arc_challenge", "same_ordering:option_order")
    write_cards(auditor.store, tmp / "grid_cards", "r1", n_boot=200, suites=SUITES)
    return tmp / "grid_cards"


def card_of(grid: Path, dataset: str) -> dict:
    return json.loads((grid / MODEL / f"{dataset}.json").read_text())


def flipgate(*args) -> int:
    from flipgate.__main__ import main

    return main([str(a) for a in args])


def one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    return err.strip()


# ------------------------------------------------------------------ Hugging Face .eval_results


def test_eval_results_read_back_by_huggingface_hub(grid, tmp_path, capsys):
    out = tmp_path / "repo"
    assert flipgate("export", "eval-results", "--grid-cards-dir", grid, "--out", out) == 0
    captured = capsys.readouterr()
    files = sorted((out / ".eval_results").glob("*.yaml"))
    assert [f.name for f in files] == ["flipgate_arc_challenge.yaml", "flipgate_mmlu.yaml"]
    assert captured.out.count("Hugging Face evaluation result of acme/tiny") == 2
    # the dataset without a Hub benchmark is named on stderr, not given a made-up id
    assert one_line(captured.err) == (
        "flipgate: acme/tiny/mmlu_philosophy: not in .eval_results: no Hugging Face Hub "
        "benchmark dataset maps to it"
    )
    expected = {
        "arc_challenge": ("allenai/ai2_arc", "ARC-Challenge", "validation"),
        "mmlu": ("cais/mmlu", "all", "test"),
    }
    for path in files:
        data = yaml.safe_load(path.read_text())
        assert isinstance(data, list) and len(data) == 1  # the Hub's format: a list of entries
        (entry,) = parse_eval_result_entries(data)
        dataset = path.stem.removeprefix("flipgate_")
        card = card_of(grid, dataset)
        hub_id, task, split = expected[dataset]
        assert (entry.dataset_id, entry.task_id) == (hub_id, task)
        assert entry.value == card["scores"]["accuracy_canonical"]["estimate"]
        assert entry.date == card["run"]["created"]
        assert entry.source_url == f"{grid.as_posix()}/{MODEL}/{dataset}.md"
        assert entry.source_name == "flipgate GRID card"
        notes = entry.notes
        n = card["dataset"]["n_items"]
        assert f"N={n} items of the {split} split" in notes, notes
        assert f"readout {card['scores']['primary_readout']}" in notes, notes
        m = card["order_robustness"]["option_order"]["regex"]
        flip = m["flip_rate"]
        assert (
            f"option_order flip rate {flip['estimate']:.3f} "
            f"[{flip['ci'][0]:.3f}, {flip['ci'][1]:.3f}] (K={m['k']} orderings, N={m['n_items']}"
        ) in notes, notes
        assert ("control same_ordering:option_order flip rate" in notes) == (
            dataset == "arc_challenge"
        )


def test_eval_results_source_url_and_model(grid, tmp_path, capsys):
    out = tmp_path / "repo"
    args = ("--grid-cards-dir", grid, "--out", out, "--model", MODEL)
    base = "https://example.org/audit/grid_cards/"
    assert flipgate("export", "eval-results", *args, "--source-url", base) == 0
    data = yaml.safe_load((out / ".eval_results/flipgate_mmlu.yaml").read_text())
    (entry,) = parse_eval_result_entries(data)
    assert entry.source_url == f"https://example.org/audit/grid_cards/{MODEL}/mmlu.md"


def test_card_command_writes_eval_results_beside_the_readme(grid, tmp_path, capsys):
    readme = tmp_path / "model" / "README.md"
    readme.parent.mkdir()
    args = ("--into", readme, "--grid-cards-dir", grid, "--eval-results")
    assert flipgate("card", *args) == 0
    assert readme.is_file()
    names = sorted(p.name for p in (readme.parent / ".eval_results").iterdir())
    assert names == ["flipgate_arc_challenge.yaml", "flipgate_mmlu.yaml"]
    assert "mmlu_philosophy" in capsys.readouterr().err
    # without the option: the README alone, as before
    plain = tmp_path / "plain" / "README.md"
    plain.parent.mkdir()
    assert flipgate("card", "--into", plain, "--grid-cards-dir", grid) == 0
    assert not (plain.parent / ".eval_results").exists()
    assert flipgate("card", "--into", plain, "--grid-cards-dir", grid, "--source-url", "x") == 4
    assert "only with --eval-results" in one_line(capsys.readouterr().err)


# ------------------------------------------------------------------------- Every Eval Ever


def test_every_eval_ever_logs_validate_with_the_package(grid, tmp_path, capsys):
    from every_eval_ever.eval_types import EvaluationLog
    from every_eval_ever.validator.validation_core import validate_file

    data = tmp_path / "data"
    args = ("--grid-cards-dir", grid, "--out", data, "--source-organization", "Test Lab")
    assert flipgate("export", "every-eval-ever", *args) == 0
    assert capsys.readouterr().out.count("Every Eval Ever log") == len(DATASETS)
    paths = sorted(data.rglob("*.json"))
    assert {p.relative_to(data).parts[:3] for p in paths} == {
        (dataset, "acme", "tiny") for dataset in DATASETS
    }  # data/<collection>/<developer>/<model>/<uuid>.json
    for path in paths:
        repo_path = "data/" + path.relative_to(data).as_posix()
        report = validate_file(path, repo_path=repo_path, run_semantic_checks=True)
        assert report.valid and not report.warnings, (report.errors, report.warnings)
        log = EvaluationLog.model_validate(json.loads(path.read_text()))
        dataset = path.relative_to(data).parts[0]
        card = card_of(grid, dataset)
        assert log.model_info.id == MODEL and log.model_info.developer == "acme"
        details = log.model_info.additional_details
        assert (details["backend"], details["dtype"], details["quantization"]) == (
            "hf",
            "bfloat16",
            "q8_0",
        )
        assert details["deployment_type"] == "self_deployed"
        assert log.model_info.inference_engine.name == card["axis_receipt"].get("engine", "hf")
        assert log.source_metadata.source_organization_name == "Test Lab"
        assert log.source_metadata.evaluator_relationship.value == "third_party"
        assert log.source_metadata.additional_details["run_id"] == "r1"
        assert log.eval_library.name == "flipgate"
        results = {r.evaluation_result_id: r for r in log.evaluation_results}
        acc = results["accuracy_canonical"]
        planted = card["scores"]["accuracy_canonical"]
        assert acc.score_details.score == planted["estimate"]
        ci = acc.score_details.uncertainty.confidence_interval
        assert [ci.lower, ci.upper] == planted["ci"]
        assert acc.score_details.uncertainty.num_samples == card["dataset"]["n_items"]
        assert not acc.metric_config.lower_is_better and acc.metric_config.metric_id == "accuracy"
        assert (
            results["accuracy_all_orderings"].score_details.score
            == card["scores"]["accuracy_all_orderings"]["estimate"]
        )
        flip = results["flip_rate/option_order"]
        m = card["order_robustness"]["option_order"]["regex"]
        assert flip.score_details.score == m["flip_rate"]["estimate"]
        ci = flip.score_details.uncertainty.confidence_interval
        assert [ci.lower, ci.upper] == m["flip_rate"]["ci"]
        assert flip.score_details.uncertainty.num_samples == m["n_items"]
        assert flip.metric_config.lower_is_better
        assert flip.metric_config.metric_parameters == {
            "facet": "option_order",
            "k": m["k"],
            "readout": "regex",
        }
        source = acc.source_data
        if dataset == "mmlu_philosophy":  # no Hub benchmark: a dataset of its own, not faked
            assert source.source_type == "other"
        else:
            assert source.source_type == "hf_dataset"
            assert (
                source.hf_repo == {"arc_challenge": "allenai/ai2_arc", "mmlu": "cais/mmlu"}[dataset]
            )
        assert ("flip_rate/same_ordering:option_order" in results) == (dataset == "arc_challenge")


def test_every_eval_ever_needs_a_developer_for_a_flat_model_id(tmp_path, capsys):
    auditor = make_auditor(tmp_path / "run", ScriptedBackend())
    auditor.store.add_model(
        "scripted", {"backend": "scripted", "weights_sha256": "abc"}, {"readouts": ["regex"]}
    )
    order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    write_cards(auditor.store, tmp_path / "grid_cards", "r1", n_boot=200, suites=SUITES)
    args = ("--grid-cards-dir", tmp_path / "grid_cards", "--out", tmp_path / "data")
    assert flipgate("export", "every-eval-ever", *args) == USAGE_ERROR
    assert "give --developer NAME" in one_line(capsys.readouterr().err)
    assert flipgate("export", "every-eval-ever", *args, "--developer", "local") == 0
    assert [p.parts[-4:-1] for p in (tmp_path / "data").rglob("*.json")] == [
        ("arc_challenge", "local", "scripted")
    ]


# ----------------------------------------------------------------- missing library, bad input


@pytest.fixture
def without(monkeypatch):
    """Make importing a module (and its submodules) fail, as when it is not installed: None in
    sys.modules, which an import (``import``, ``from``, importlib) answers with
    ModuleNotFoundError."""

    def hide(name: str) -> None:
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.setitem(sys.modules, module, None)
        monkeypatch.setitem(sys.modules, name, None)

    return hide


@pytest.mark.parametrize(
    "command, module, package",
    [
        (("export", "every-eval-ever"), "every_eval_ever", "every-eval-ever"),
        (("export", "eval-results"), "huggingface_hub", "huggingface_hub"),
        (("card", "--eval-results", "--into", "README.md"), "huggingface_hub", "huggingface_hub"),
    ],
)
def test_a_missing_library_is_one_line(grid, tmp_path, capsys, without, command, module, package):
    without(module)
    out = ("--out", tmp_path / "out") if command[0] == "export" else ()
    assert flipgate(*command, "--grid-cards-dir", grid, *out) == USAGE_ERROR
    line = one_line(capsys.readouterr().err)
    assert line.startswith("flipgate: ") and f"needs the package {package}" in line, line
    assert "-m pip install" in line and "Traceback" not in line, line
    assert not (tmp_path / "out").exists()


def test_an_old_huggingface_hub_is_one_line(grid, tmp_path, capsys, monkeypatch):
    old = types.ModuleType("huggingface_hub")  # one from before the .eval_results format
    old.__version__ = "0.30.0"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", old)
    args = ("--grid-cards-dir", grid, "--out", tmp_path)
    assert flipgate("export", "eval-results", *args) == USAGE_ERROR
    line = one_line(capsys.readouterr().err)
    assert "huggingface_hub 0.30.0 has no EvalResultEntry" in line, line
    assert "-m pip install --upgrade huggingface_hub" in line, line


@pytest.mark.parametrize("fmt", ["eval-results", "every-eval-ever"])
def test_bad_input_is_one_line(grid, tmp_path, capsys, fmt):
    out = ("--out", tmp_path / "out")
    assert flipgate("export", fmt, "--grid-cards-dir", tmp_path / "none", *out) == USAGE_ERROR
    assert "no GRID cards directory" in one_line(capsys.readouterr().err)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert flipgate("export", fmt, "--grid-cards-dir", empty, *out) == USAGE_ERROR
    assert "holds no model's GRID cards" in one_line(capsys.readouterr().err)
    assert flipgate("export", fmt, "--grid-cards-dir", grid, *out, "--model", "nope") == 4
    line = one_line(capsys.readouterr().err)
    assert "no GRID cards of model 'nope'" in line and "(models there: acme/tiny)" in line, line
    assert flipgate("export", fmt, "--grid-cards-dir", grid) == USAGE_ERROR  # no --out
    assert "--out" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()
    assert flipgate("export") == USAGE_ERROR
    assert one_line(capsys.readouterr().err).startswith("flipgate: python -m flipgate export:")


@pytest.mark.parametrize(
    "command",
    [
        ("export", "eval-results", "--out", "out"),
        ("export", "every-eval-ever", "--out", "out", "--developer", "acme"),
        ("card", "--into", "out/README.md"),
        ("card", "--into", "out/"),
    ],
)
def test_a_truncated_card_stops_the_export_unless_allowed(grid, tmp_path, capsys, command):
    """A card file cut short (a full disk, a killed copy) is never skipped in silence: the command
    names it with why and exits 4 writing nothing; ``--allow-skipped-cards`` writes the rest and
    names it on stderr."""
    copy = tmp_path / "grid_cards"
    shutil.copytree(grid, copy)
    truncated = copy / MODEL / "arc_challenge.json"
    truncated.write_text(truncated.read_text()[:200])
    args = [str(tmp_path / a) if a.startswith("out") else a for a in command]
    if command[0] == "card":
        (tmp_path / "out").mkdir()
    assert flipgate(*args, "--grid-cards-dir", copy) == USAGE_ERROR
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"flipgate: {truncated}: JSONDecodeError"), line
    assert "1 card file could not be read" in line and "--allow-skipped-cards" in line, line
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert flipgate(*args, "--grid-cards-dir", copy, "--allow-skipped-cards") == 0
    err = capsys.readouterr().err
    assert f"flipgate: left out {truncated}: JSONDecodeError" in err, err
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()]


@pytest.mark.parametrize(
    "command, option",
    [
        (("export", "eval-results", "--out", "afile/repo"), "--out"),
        (("export", "every-eval-ever", "--out", "afile/data", "--developer", "acme"), "--out"),
        (("card", "--into", "afile/cards/"), "--into"),
        (("card", "--into", "afile/README.md"), "--into"),
    ],
)
def test_a_path_under_a_file_names_the_option(grid, tmp_path, capsys, command, option):
    """An OS error on a path the user gave is one line naming the option and the path, not a
    bare ``[Errno 20] Not a directory`` line."""
    (tmp_path / "afile").write_text("a file\n")
    args = [str(tmp_path / a) if a.startswith("afile") else a for a in command]
    assert flipgate(*args, "--grid-cards-dir", grid) == USAGE_ERROR
    line = one_line(capsys.readouterr().err)
    assert option in line and str(tmp_path / "afile") in line, line
    assert not line.startswith("flipgate: [Errno"), line


# ------------------------------------------------ card --into writes only a model card (#60)


def _project_with(tmp_path: Path, grid: Path, monkeypatch) -> Path:
    """A user's project as an audit leaves it (models.yaml, grid_cards/, reports/), as cwd."""
    project = tmp_path / "proj"
    shutil.copytree(grid, project / "grid_cards")
    for name, text in {
        "models.yaml": "models:\n  - {id: m}\n",
        "pyproject.toml": "[project]\nname = 'x'\n",
        "reports/baseline/PROMOTED.json": "{}\n",
        "reports/runs/r1/trials.sqlite": "store\n",
        "reports/notes.md": "# notes\n",
    }.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    monkeypatch.chdir(project)
    return project


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "into",
    [
        "models.yaml",
        "pyproject.toml",
        f"grid_cards/{MODEL}/arc_challenge.json",
        "reports/baseline/PROMOTED.json",
        "reports/runs/r1/trials.sqlite",
        "card.txt",
        f"grid_cards/{MODEL}/mmlu.md",  # a GRID card's Markdown: flipgate's own output
        "reports/notes.md",
        "reports/",
    ],
)
def test_card_writes_only_into_a_markdown_model_card(into, grid, tmp_path, capsys, monkeypatch):
    """A file that is not a Markdown model card (YAML, TOML, JSON, a store, another extension) or
    lies among flipgate's outputs is refused in one line naming the option; nothing changes."""
    project = _project_with(tmp_path, grid, monkeypatch)
    before = _files(project)
    assert flipgate("card", "--into", into, "--model", MODEL) == USAGE_ERROR
    line = one_line(capsys.readouterr().err)
    assert "--into" in line and "nothing written" in line, line
    assert _files(project) == before


def test_card_never_writes_through_a_link_out_of_the_project(grid, tmp_path, capsys, monkeypatch):
    """README.md (or DIR/<model>) as a link to a file outside the project: refused, the link and
    the file it points to left as they were; a dangling link too."""
    project = _project_with(tmp_path, grid, monkeypatch)
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (project / "README.md").symlink_to(secret)
    (project / "cards" / "acme").mkdir(parents=True)
    (project / "cards" / MODEL).symlink_to(tmp_path, target_is_directory=True)
    (project / "GONE.md").symlink_to("docs/nowhere.md")
    before = _files(tmp_path)
    for into, why in (
        ("README.md", "outside the project"),
        ("cards/", "outside the project"),
        ("GONE.md", "does not exist"),
    ):
        assert flipgate("card", "--into", into, "--model", MODEL) == USAGE_ERROR
        line = one_line(capsys.readouterr().err)
        assert why in line and "--into" in line, line
    assert _files(tmp_path) == before
    assert (project / "README.md").is_symlink()


def test_card_follows_a_link_inside_the_project(grid, tmp_path, capsys, monkeypatch):
    """README.md as a link to docs/model-card.md in the project: the card is merged into that
    file, atomically, and README.md stays a link to it."""
    project = _project_with(tmp_path, grid, monkeypatch)
    (project / "docs").mkdir()
    (project / "docs" / "model-card.md").write_text("# tiny\n\nThe author's words.\n")
    (project / "README.md").symlink_to("docs/model-card.md")
    assert flipgate("card", "--into", "README.md", "--model", MODEL) == 0
    assert "README.md: GRID section" in capsys.readouterr().out
    assert (project / "README.md").is_symlink()
    text = (project / "docs" / "model-card.md").read_text()
    assert "The author's words." in text and "flipgate:begin" in text
