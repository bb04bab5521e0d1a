"""Answer-reading judges run over K orderings of what they are shown, answering with the
permutation consensus (docs/definitions.md §9): the sem-flip judge over orderings of the K answers
it compares, the decomposition's judge readout over orderings of the option list (labels stay
attached to their options). ``audit.judge_consensus`` turns it on; each judgement then costs K
calls (the cost guard projects them).

The judge's verdict labels are the candidates: per run, ``letter_logprob`` scores are the label
probabilities (normalised over the request's labels), any other readout gives 1 to the label it
read and 0 to the others; an unread verdict is a parse failure. The consensus label is the
winner of C (:func:`flipgate.metrics.consensus.consensus`); a tie or no parsed run gives None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from flipgate.backends.base import Output, Request
from flipgate.judging.orderings import judge_orderings
from flipgate.metrics.consensus import RunJudgement, consensus
from flipgate.readouts import label_probabilities, read_label

if TYPE_CHECKING:
    from flipgate.metrics.consensus import ConsensusSettings

T = TypeVar("T")


class JudgeCaller(Protocol):
    """What a judgement needs of the auditor (:class:`flipgate.calls.Auditor` is one): a model's
    settings and the outputs of requests to it. A protocol, so that this building block does not
    import :mod:`flipgate.calls`, a core service a layer above it."""

    @property
    def config(self) -> Any:
        """The run's AuditConfig (its ``seed`` draws the shown orderings)."""
        ...

    def model(self, model_id: str) -> dict[str, Any]: ...

    def outputs(
        self, model_id: str, requests: list[Request], use_cache: bool, label: str
    ) -> tuple[list[Output], list[bool]]: ...


def label_run(output: Output, request: Request, readout: str) -> RunJudgement:
    """One run's verdict as a score per label of ``request.labels``."""
    labels = request.labels
    if readout == "letter_logprob":
        scores = label_probabilities(output, labels)
        return RunJudgement.failed(scores) if isinstance(scores, str) else RunJudgement.of(scores)
    label = read_label(readout, output, labels, request.answer_prefix)
    if label is None:
        return RunJudgement.failed("no verdict label")
    return RunJudgement.of([float(lab == label) for lab in labels])


def shown_orders(n: int, settings: ConsensusSettings, seed: int) -> list[tuple[int, ...]]:
    """The orderings of the ``n`` things a judgement shows (canonical first)."""
    return judge_orderings(n, settings.k, seed, settings.orderings)


def judge_runs(cfg: Any, n_shown: int) -> int:
    """Calls per judgement of an answer-reading judge shown ``n_shown`` things: 1, or the
    number of orderings under ``audit.judge_consensus`` (``cfg`` is the AuditConfig)."""
    settings = cfg.judge_consensus
    return 1 if settings is None else len(shown_orders(n_shown, settings, cfg.seed))


def permuted_requests(
    things: Sequence[T],
    build: Callable[[list[T], int], Request],
    settings: ConsensusSettings | None,
    seed: int,
) -> list[Request]:
    """One request per ordering of ``things`` (``build(shown, ordering_index)``); just the
    canonical one without consensus settings."""
    if settings is None:
        return [build(list(things), 0)]
    return [
        build([things[i] for i in perm], o)
        for o, perm in enumerate(shown_orders(len(things), settings, seed))
    ]


def consensus_labels(
    auditor: JudgeCaller,
    judge_id: str,
    groups: list[list[Request]],
    settings: ConsensusSettings | None,
    label: str,
) -> list[str | None]:
    """Each group's verdict label: the consensus of its requests (one per ordering), or the
    single request's label without consensus settings."""
    flat = [r for g in groups for r in g]
    outputs, _ = auditor.outputs(judge_id, flat, use_cache=True, label=label)
    readout = auditor.model(judge_id)["primary_readout"]
    verdicts: list[str | None] = []
    at = 0
    for group in groups:
        runs = [label_run(o, r, readout) for o, r in zip(outputs[at : at + len(group)], group)]
        at += len(group)
        if settings is None:
            pick = runs[0].pick()
        else:
            c = consensus(runs, settings.weights, settings.tie_tolerance)
            pick = None if c is None else c.pick()
        verdicts.append(None if pick is None else group[0].labels[pick])
    return verdicts
