"""Declared prompt formats of the prompt_format axis (docs/definitions.md §8). They differ in
separators, casing, answer cue and option layout; each is stored by id and sha256 in the
manifest. Every cue is one the regex readout reads ("Answer:", "ANSWER:", "The answer is")."""

from __future__ import annotations

from dataclasses import dataclass

from flipgate.facets.option_order import MCQ_TEMPLATE
from flipgate.hashing import sha256_json


@dataclass(frozen=True)
class PromptFormat:
    """``text`` has ``{question}`` and ``{options}``; each option is ``option_line`` with
    ``{label}`` and ``{option}``, joined by ``joiner``; the answer follows ``answer_cue``."""

    id: str
    text: str
    option_line: str
    joiner: str
    answer_cue: str

    @property
    def sha256(self) -> str:
        return sha256_json([self.text, self.option_line, self.joiner, self.answer_cue])

    def render(self, question: str, labels: tuple[str, ...], options: list[str]) -> str:
        lines = self.joiner.join(
            self.option_line.format(label=label, option=option)
            for label, option in zip(labels, options)
        )
        return self.text.format(question=question, options=lines)


#: Facet-Probe's MCQ template, as the option_order facet shows it
CANONICAL_FORMAT = PromptFormat("fp-mcq-v1", MCQ_TEMPLATE, "{label}. {option}", "\n", "Answer:")

FORMATS: tuple[PromptFormat, ...] = (
    CANONICAL_FORMAT,
    PromptFormat(
        "inline-parentheses",
        "Question: {question}\nChoices: {options}\n"
        'Reply with the label of the correct choice, as "Answer: <label>".',
        "({label}) {option}",
        "  ",
        "Answer:",
    ),
    PromptFormat(
        "upper-headers",
        "QUESTION\n{question}\n\nOPTIONS\n{options}\n\n"
        'STATE THE LABEL OF THE CORRECT OPTION ON THE LAST LINE, AS "ANSWER: <label>".',
        "{label}: {option}",
        "\n",
        "ANSWER:",
    ),
    PromptFormat(
        "markdown-answer-is",
        "### Question\n{question}\n\n### Options\n{options}\n\n"
        'Think about which option is right, then finish with "The answer is <label>".',
        "- **{label}** {option}",
        "\n",
        "The answer is",
    ),
)
