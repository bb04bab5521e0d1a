"""The judge readout of the decomposition (docs/definitions.md §8; flipbench) and its gate.

An LLM judge reads a model's free-text reply to a multiple-choice question and says which option
the reply chose (by its displayed label), or ``none``. Before any judged number is recorded, the
judge must pass the gate on a labelled agreement set (``fixtures/judge/agreement.jsonl``): agree
with the labels on at least ``min_agreement`` of the replies, and keep its choice when the
options are listed in reverse order with their labels attached (the position-bias swap test) on
at least ``min_swap_consistency`` of the labelled ones. The judge is ``judge.model`` of
``audit.decomposition``, else ``audit.judge``, else the audited model itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scipy.stats import binomtest

from flipgate import FlipgateError
from flipgate.backends.base import Request
from flipgate.items.item import Item
from flipgate.items.validate import RowItems, check_data_file, option_texts
from flipgate.judging.permuted import JudgeCaller, consensus_labels, permuted_requests

if TYPE_CHECKING:
    from flipgate.metrics.consensus import ConsensusSettings

NONE = "none"
TEMPLATE = (
    "You check another assistant's reply to a multiple-choice question and report which option "
    "the reply chose. Judge by what the reply says, not by where an option is listed. If the "
    "reply chose no option, or its label and its text point to different options, the answer is "
    "none.\n\nQuestion: {question}\nOptions:\n{options}\n\nReply:\n{reply}\n\n"
    'On the final line, output exactly one option label, or none, preceded by "Answer: ".'
)


def choice_request(
    question: str,
    labels: tuple[str, ...],
    options: list[str],
    reply: str,
    order: Sequence[int] | None = None,
    key: tuple = (),
) -> Request:
    """The judge's request; ``order`` lists the options in that order of their indices, each
    keeping its label (reversed: the swap test; permuted: the consensus judge)."""
    order = range(len(labels)) if order is None else order
    lines = "\n".join(f"{labels[i]}. {options[i]}" for i in order)
    prompt = TEMPLATE.format(question=question.strip(), options=lines, reply=reply.strip())
    return Request((("user", prompt),), "Answer:", (*labels, NONE), 0, key)


@dataclass(frozen=True)
class LabelledReply:
    id: str
    question: str
    labels: tuple[str, ...]
    options: list[str]
    reply: str
    answer: str | None  # the label the reply chose, None: no option


#: the fields of an agreement-set line besides ``answer`` (a label or null)
FIELDS = {"id": str, "question": str, "labels": list, "options": list, "reply": str}


def load_agreement_set(path: Path | str) -> list[LabelledReply]:
    """The labelled replies; a malformed line names the file, line and field."""
    path = Path(path)
    if not path.exists():
        raise FlipgateError(f"judge gate: agreement set {path} does not exist")
    check_data_file(path, "audit.decomposition.judge.agreement_set", text=True)
    rows = RowItems("id", "options", "answer", unit="line")  # the checks of every dataset row
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FlipgateError(f"{where}: not a JSON object ({exc.msg})") from None
        if not isinstance(row, dict):
            raise FlipgateError(f"{where}: not a JSON object (value: {row!r})")
        for name, kind in FIELDS.items():
            if not isinstance(row.get(name), kind):
                raise FlipgateError(
                    f"{where}: field {name!r} must be a {kind.__name__} (value: {row.get(name)!r})"
                )
        labels = tuple(option_texts(row["labels"], where, "labels"))
        if len(labels) != len(row["options"]) or row.get("answer") not in (*labels, None):
            raise FlipgateError(
                f"{where}: field 'answer' must be one of the labels {list(labels)} or null, with "
                f"one option per label (value: {row.get('answer')!r})"
            )
        gold = None if row.get("answer") is None else labels.index(row["answer"])
        rows.add(Item(row["id"], str(path), row["question"], tuple(row["options"]), gold), where, n)
        out.append(
            LabelledReply(
                row["id"], row["question"], labels, row["options"], row["reply"], row.get("answer")
            )
        )
    return out


@dataclass(frozen=True)
class JudgeGateReport:
    judge: str
    passed: bool
    reason: str
    agreement: float
    agreement_ci: tuple[float, float]
    n: int
    swap_consistency: float
    n_swapped: int
    min_agreement: float
    min_swap_consistency: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choice_requests(
    question: str,
    labels: tuple[str, ...],
    options: list[str],
    reply: str,
    settings: ConsensusSettings | None,
    seed: int,
    key: tuple = (),
) -> list[Request]:
    """The judge's requests for one reply: the listing in source order, or one per ordering of
    the options under ``audit.judge_consensus`` (the ordering index is the key's last field)."""
    return permuted_requests(
        range(len(labels)),
        lambda order, o: choice_request(
            question, labels, options, reply, order, key[:-1] + (o,) if key else ()
        ),
        settings,
        seed,
    )


def choices(
    auditor: JudgeCaller,
    judge_id: str,
    groups: list[list[Request]],
    settings: ConsensusSettings | None,
    label: str,
) -> list[str | None]:
    """The option label the judge chose for each group of requests; None for ``none``, a tie
    or an unread verdict."""
    picks = consensus_labels(auditor, judge_id, groups, settings, label)
    return [None if p in (None, NONE) else p for p in picks]


def judge_gate(
    auditor: JudgeCaller,
    judge_id: str,
    replies: list[LabelledReply],
    min_agreement: float = 0.9,
    min_swap_consistency: float = 0.9,
    settings: ConsensusSettings | None = None,
) -> JudgeGateReport:
    """docs/definitions.md §8 judge gate: agreement with the labels (of the judge as the
    readout uses it: the consensus of its orderings under ``settings``) and the swap test (one
    call listing the options in reverse against the canonical one)."""
    labelled = [r for r in replies if r.answer is not None]
    seed = auditor.config.seed
    groups = [
        choice_requests(r.question, r.labels, r.options, r.reply, settings, seed) for r in replies
    ]
    direct = dict(
        zip((r.id for r in replies), choices(auditor, judge_id, groups, settings, "judge gate"))
    )
    # the swap test: one call listing the options in source order, one in reverse
    canonical_calls = [[choice_request(r.question, r.labels, r.options, r.reply)] for r in labelled]
    reversed_calls = [
        [choice_request(r.question, r.labels, r.options, r.reply, range(len(r.labels))[::-1])]
        for r in labelled
    ]
    picks = choices(auditor, judge_id, canonical_calls + reversed_calls, None, "judge gate")
    canonical, swapped = picks[: len(labelled)], picks[len(labelled) :]
    agree = sum(direct[r.id] == r.answer for r in replies)
    same = sum(c == s for c, s in zip(canonical, swapped))
    agreement = agree / len(replies)
    consistency = same / len(labelled) if labelled else float("nan")
    ci = binomtest(agree, len(replies)).proportion_ci(0.95, method="wilson")
    failures = []
    if agreement < min_agreement:
        failures.append(
            f"agreement with the labelled set {agreement:.2f} ({agree}/{len(replies)}) < "
            f"{min_agreement}"
        )
    if not consistency >= min_swap_consistency:
        failures.append(
            f"swap consistency {consistency:.2f} ({same}/{len(labelled)}) < {min_swap_consistency}"
        )
    return JudgeGateReport(
        judge_id,
        not failures,
        f"judge {judge_id!r}: " + ("; ".join(failures) if failures else "passed"),
        agreement,
        (float(ci.low), float(ci.high)),
        len(replies),
        consistency,
        len(labelled),
        min_agreement,
        min_swap_consistency,
    )
