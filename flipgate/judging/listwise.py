"""The factuality-first listwise judge prompt (PCFJudge §3.2) and its two readouts.

``listwise``: the judge writes one line per candidate — a score in [0, 1], flags for a major
factual error, hallucinated specificity and calibrated uncertainty, a short rationale — and a
ranking line. :func:`parse_listwise` reads it back; anything it cannot read unambiguously (a
candidate without a score, a score outside [0, 1], a ranking that is not a permutation, a
missing uncertainty flag) is a parse failure with its reason, never a guess.

``label_logprob``: for judges too small to write that format (the embedded models), the same
prompt ends by asking for the number of the most reliable candidate, and the scores are the
probabilities of the candidate numbers at the answer position (normalised over the candidates);
ranks and the top set follow from them, and the uncertainty flag is not given (0 for all, which
leaves the winner unchanged).
"""

from __future__ import annotations

import re

from flipgate.backends.base import Output, Request
from flipgate.metrics.consensus import RunJudgement
from flipgate.readouts import label_probabilities

READOUTS = ("listwise", "label_logprob")

INSTRUCTION = (
    "You are a skeptical fact-checker. Judge the candidate responses to the prompt below by "
    "factual reliability, not by helpfulness, length or style. A major factual error or a "
    "specific detail without support (a date, number, name or source) counts against a "
    "response; stating uncertainty counts for it only when caution is warranted, not when it "
    "evades the question. The order of the candidates means nothing.\n\n"
    "Prompt: {question}\n\nCandidates:\n{candidates}\n\n"
)
LISTWISE_TASK = (
    "For each candidate write one line:\n"
    "[<number>] score=<0 to 1> major_error=<yes|no> hallucinated_specificity=<yes|no> "
    "calibrated_uncertainty=<yes|no> | <one-sentence rationale>\n"
    "Then one last line: Ranking: <candidate numbers, most reliable first, separated by '>'>"
)
CHOICE_TASK = (
    "Which candidate is the most factually reliable? On the final line, output its number "
    'preceded by "Answer: ".'
)


def labels_for(n: int) -> tuple[str, ...]:
    return tuple(str(i) for i in range(1, n + 1))


def listwise_request(
    question: str, shown: list[str], readout: str, key: tuple = (), max_new_tokens: int = 400
) -> Request:
    """The judge's request for candidates ``shown`` in display order, numbered from 1."""
    labels = labels_for(len(shown))
    listed = "\n".join(f"[{label}] {text.strip()}" for label, text in zip(labels, shown))
    prompt = INSTRUCTION.format(question=question.strip(), candidates=listed)
    if readout == "listwise":
        return Request(
            (("user", prompt + LISTWISE_TASK),), "", (), 0, key, max_new_tokens=max_new_tokens
        )
    return Request((("user", prompt + CHOICE_TASK),), "Answer:", labels, 0, key, max_new_tokens=1)


_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
#: a candidate's marker before its score: "[2]" anywhere (after a preamble such as "Answer:"),
#: or "2." / "2:" / "Candidate 2:" at the start of the line
_BRACKET = re.compile(r"\[\s*(\d+)\s*\]")
_START = re.compile(r"^[\s>*#-]*(?:candidate\s*)?(\d+)\s*[:.)]", re.IGNORECASE)
_SCORE = re.compile(rf"score\**\s*[=:]\s*\**\s*{_NUMBER}\s*(%|/\s*1(?:\.0)?\b)?", re.IGNORECASE)
_FLAG = r"{name}\**\s*[=:]\s*\**\s*(yes|no|true|false)\b"
_RANKING = re.compile(r"ranking\**\s*[:=]\s*(.+)$", re.IGNORECASE | re.MULTILINE)


def _flag(name: str, text: str) -> bool | None:
    found = re.search(_FLAG.format(name=name), text, re.IGNORECASE)
    return None if found is None else found.group(1).lower() in ("yes", "true")


def parse_listwise(text: str, n: int) -> tuple[list[float], list[bool], list[int] | None] | str:
    """(scores, calibrated-uncertainty flags, ranking or None) in display order, or the reason
    the text does not parse. The ranking lists display positions (0-based), best first."""
    scores: dict[int, float] = {}
    uncertain: dict[int, bool] = {}
    for line in text.splitlines():
        found = _SCORE.search(line)
        if found is None:
            continue
        head = _BRACKET.search(line, 0, found.start()) or _START.match(line)
        if head is None:
            continue
        slot = int(head.group(1)) - 1
        if not 0 <= slot < n:
            return f"score line for candidate [{slot + 1}], but there are {n} candidates"
        value = float(found.group(1)) / (100 if found.group(2) == "%" else 1)
        if not 0 <= value <= 1:
            return f"score {found.group(1)} for candidate [{slot + 1}] is outside [0, 1]"
        if slot in scores and scores[slot] != value:
            return f"candidate [{slot + 1}] has two scores ({scores[slot]:g} and {value:g})"
        scores[slot] = value
        flag = _flag("calibrated_uncertainty", line)
        if flag is not None:
            uncertain[slot] = flag
    for name, given in (("score", scores), ("calibrated_uncertainty flag", uncertain)):
        missing = [i + 1 for i in range(n) if i not in given]
        if missing:
            return f"no {name} for candidate(s) {missing}"
    ranking = None
    lines = _RANKING.findall(text)
    if lines:
        numbers = [int(x) - 1 for x in re.findall(r"\d+", lines[-1])]
        if sorted(numbers) != list(range(n)):
            return f"ranking {lines[-1].strip()!r} is not an order of the {n} candidates"
        ranking = numbers
    return [scores[i] for i in range(n)], [uncertain[i] for i in range(n)], ranking


def run_judgement(
    output: Output, request: Request, perm: tuple[int, ...], readout: str
) -> RunJudgement:
    """One run's verdict mapped back to source indices (``perm[slot]`` = source index shown in
    ``slot``)."""
    n = len(perm)
    if readout == "label_logprob":
        shown = label_probabilities(output, request.labels)
        if isinstance(shown, str):
            return RunJudgement.failed(shown)
        return RunJudgement.of(_to_source(shown, perm))
    parsed = parse_listwise(output.text, n)
    if isinstance(parsed, str):
        return RunJudgement.failed(parsed)
    shown_scores, shown_flags, shown_ranking = parsed
    ranking = None if shown_ranking is None else [perm[slot] for slot in shown_ranking]
    return RunJudgement.of(_to_source(shown_scores, perm), _to_source(shown_flags, perm), ranking)


def _to_source(values: list, perm: tuple[int, ...]) -> list:
    out = [values[0]] * len(perm)
    for slot, source in enumerate(perm):
        out[source] = values[slot]
    return out
