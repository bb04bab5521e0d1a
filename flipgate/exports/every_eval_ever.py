"""A model's GRID cards as Every Eval Ever evaluation logs (https://github.com/evaleval/
every_eval_ever: ``every_eval_ever/schemas/eval.schema.json``), built with the package's own
pydantic types (``every_eval_ever.eval_types``) and written by its own publisher
(``every_eval_ever.converters.common.publication.publish_evaluation_logs``), as its converters do.

One ``EvaluationLog`` per card, i.e. per (model, dataset), as the package's lm-eval converter writes
one per task: ``<out>/<dataset>/<developer>/<model>/<uuid4>.json`` where ``<out>`` is the
datastore's ``data/`` directory. Its results: accuracy under the canonical option order and over all
orderings, and each order cell's flip rate (controls included) under the cell's primary readout,
each with its item-clustered bootstrap CI and N; the model's backend, engine, dtype and
quantization from the card's axis receipt; decoding from its receipt too."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flipgate import FlipgateError, storage
from flipgate.exports import require
from flipgate.exports.benchmarks import HUB_BENCHMARKS
from flipgate.exports.readout import Value, card_path, cell_readouts

PACKAGE = "every-eval-ever"
#: it declares Python >= 3.12, but its types, publisher and validator run on 3.11 (the Makefile)
INSTALL = "--no-deps --ignore-requires-python every-eval-ever==0.3.0"
RELATIONSHIPS = ("first_party", "third_party", "collaborative", "other")
#: how a disk error publishing the logs is named
LOGS = storage.Place("Every Eval Ever data directory", "--out", "give --out another directory")
#: backends that run the model on the auditor's own machine
SELF_DEPLOYED = {"hf"}


def eee(module: str = "eval_types") -> Any:
    """``every_eval_ever.<module>``, or a one-line FlipgateError naming the package."""
    return require(f"every_eval_ever.{module}", PACKAGE, INSTALL, "export every-eval-ever")


def _details(pairs: dict[str, Any]) -> dict[str, str] | None:
    """The schema's ``additional_details``: string values only, the unknown ones left out."""
    out = {k: str(v) for k, v in pairs.items() if v is not None}
    return out or None


def _uncertainty(value: Value, n: int) -> Any:
    t = eee()
    return t.Uncertainty(
        confidence_interval=(
            t.ConfidenceInterval(
                lower=value.ci[0], upper=value.ci[1], method="item-clustered bootstrap"
            )
            if value.ci
            else None
        ),
        num_samples=n,
    )


def _proportion(metric_id: str, name: str, lower_is_better: bool, **parameters: Any) -> Any:
    kind = "accuracy" if metric_id == "accuracy" else None
    return eee().MetricConfig(
        evaluation_description=name,
        metric_id=metric_id,
        metric_name=name,
        metric_kind=kind,
        metric_unit="proportion",
        metric_parameters=parameters or None,
        lower_is_better=lower_is_better,
        score_type="continuous",
        min_score=0.0,
        max_score=1.0,
    )


def _source_data(card: dict) -> Any:
    t = eee()
    dataset = card["dataset"]
    bench = HUB_BENCHMARKS.get(dataset["name"])
    extra = _details({"sampling": dataset["sampling"], "n_items": dataset["n_items"]})
    if bench is None:
        return t.SourceDataPrivate(
            dataset_name=dataset["name"], source_type="other", additional_details=extra
        )
    return t.SourceDataHf(
        dataset_name=dataset["name"],
        source_type="hf_dataset",
        hf_repo=bench.dataset_id,
        hf_split=bench.split,
        additional_details=_details({**(extra or {}), "task_id": bench.task_id}),
    )


def _generation(card: dict) -> Any:
    t = eee()
    receipt = card["axis_receipt"]
    decoding = receipt["decoding"]
    return t.GenerationConfig(
        generation_args=t.GenerationArgs(
            temperature=decoding.get("temperature"),
            top_p=decoding.get("top_p"),
            max_tokens=decoding.get("max_new_tokens"),
            reasoning=False,
        ),
        additional_details=_details(
            {
                "greedy": decoding.get("greedy"),
                "decoding": decoding.get("name"),
                "template_id": receipt["template_id"],
                "template_sha256": receipt["template_sha256"],
                "few_shot": receipt["few_shot"]["count"],
            }
        ),
    )


def _model(card: dict, developer: str | None) -> Any:
    t = eee()
    receipt = card["axis_receipt"]
    model_id = card["model"]["id"]
    backend = card["model"]["backend"]
    versions = receipt.get("library_versions") or {}
    engine = receipt.get("engine") or backend
    return t.ModelInfo(
        name=model_id,
        id=model_id,
        developer=model_id.split("/")[0] if "/" in model_id else developer,
        inference_engine=t.InferenceEngine(
            name=engine,
            version=versions.get("transformers") if backend == "hf" else None,
        ),
        additional_details=_details(
            {
                "backend": backend,
                "source": card["model"].get("source"),
                "dtype": receipt.get("dtype"),
                "quantization": receipt.get("quantization"),
                "weights_sha256": receipt.get("weights_sha256"),
                "model_revision": receipt.get("model_revision"),
                "tokenizer_sha256": receipt.get("tokenizer_sha256"),
                "deployment_type": "self_deployed" if backend in SELF_DEPLOYED else "unknown",
            }
        ),
    )


def _results(card: dict) -> list[Any]:
    t = eee()
    source, generation = _source_data(card), _generation(card)
    created = eee("converters.common.utils").convert_timestamp_to_unix_format(
        card["run"]["created"]
    )
    n = card["dataset"]["n_items"]
    scores = card["scores"]
    results = []

    def add(result_id: str, value: Value | None, n: int, config: Any) -> None:
        if value is None:  # no estimate (e.g. no item parsed): nothing to report
            return
        results.append(
            t.EvaluationResult(
                evaluation_result_id=result_id,
                evaluation_name=card["dataset"]["name"],
                source_data=source,
                evaluation_timestamp=created,
                metric_config=config,
                score_details=t.ScoreDetails(
                    score=value.estimate, uncertainty=_uncertainty(value, n)
                ),
                generation_config=generation,
            )
        )

    readout = scores["primary_readout"]
    add(
        "accuracy_canonical",
        Value.of(scores["accuracy_canonical"]),
        n,
        _proportion(
            "accuracy",
            f"accuracy under the canonical option order ({scores['facet']})",
            False,
            readout=readout,
        ),
    )
    add(
        "accuracy_all_orderings",
        Value.of(scores["accuracy_all_orderings"]),
        n,
        _proportion(
            "accuracy",
            f"accuracy over all {scores['facet']} orderings",
            False,
            readout=readout,
        ),
    )
    for c in cell_readouts(card):
        kind = "control: canonical ordering repeated" if c.control else "orderings"
        add(
            f"flip_rate/{c.cell}",
            c.flip_rate,
            c.n_items,
            _proportion(
                "flipgate.flip_rate",
                f"{c.cell} flip rate: share of items whose answer changes across K={c.k} {kind}",
                True,
                facet=c.cell,
                k=c.k,
                readout=c.readout,
            ),
        )
    return results


def evaluation_log(
    card: dict,
    retrieved: str,
    developer: str | None = None,
    organization: str = "unknown",
    relationship: str = "third_party",
    source_base: str = "grid_cards",
) -> Any:
    """The card as one ``EvaluationLog`` (validated by its pydantic model)."""
    t = eee()
    model = _model(card, developer)
    dataset = card["dataset"]["name"]
    results = _results(card)
    if not results:
        raise FlipgateError(f"{card['model']['id']}/{dataset}: the card has no estimate to export")
    versions = card["axis_receipt"].get("library_versions") or {}
    return t.EvaluationLog(
        schema_version=eee("converters").SCHEMA_VERSION,
        evaluation_id=f"{dataset}/{model.id}/{retrieved}",
        evaluation_timestamp=results[0].evaluation_timestamp,
        retrieved_timestamp=retrieved,
        source_metadata=t.SourceMetadata(
            source_name="flipgate",
            source_type="evaluation_run",
            source_organization_name=organization,
            evaluator_relationship=relationship,
            additional_details=_details(
                {
                    "grid_card": card_path(card, source_base),
                    "run_id": card["run"]["run_id"],
                    "trials_store": card["run"]["trials_store"],
                    "git_commit": card["axis_receipt"].get("git_commit"),
                }
            ),
        ),
        eval_library=t.EvalLibrary(name="flipgate", version=versions.get("flipgate") or "unknown"),
        model_info=model,
        evaluation_results=results,
    )


def write(
    out: Path,
    cards: Sequence[dict],
    developer: str | None = None,
    organization: str = "unknown",
    relationship: str = "third_party",
    source_base: str = "grid_cards",
) -> list[Path]:
    """One log per card under ``out`` (the datastore's ``data/`` directory), published by the
    package (validated before any file is written; never over an existing file)."""
    retrieved = eee("converters.common.utils").get_current_unix_timestamp()
    publish = eee("converters.common.publication").publish_evaluation_logs
    for card in cards:
        model_id = card["model"]["id"]
        if "/" not in model_id and not developer:
            raise FlipgateError(
                f"model id {model_id!r} names no developer (no org/ prefix), which the Every Eval "
                "Ever datastore files it under: give --developer NAME"
            )
    try:
        logs = [
            evaluation_log(card, retrieved, developer, organization, relationship, source_base)
            for card in cards
        ]
        with storage.guarded(LOGS, out):
            return list(publish(logs, out, [str(uuid.uuid4()) for _ in logs]))
    except ValueError as exc:  # pydantic's ValidationError included
        raise FlipgateError(
            f"every-eval-ever refused the logs: {' '.join(str(exc).split())}"
        ) from None
