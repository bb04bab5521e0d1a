"""Demoted, opt-in facets (Facet-Probe App. F): few-shot exemplar order, dialog-turn order,
tool-description order. Each permutes one list of units in the prompt; answers are short and scored
by normalised EM. They run only when models.yaml lists them under ``audit.facets``.
"""

from __future__ import annotations

from flipgate.backends.base import Request
from flipgate.facets.short_answer import ShortAnswerFacet
from flipgate.hashing import sha256_text
from flipgate.items.item import Item

FEW_SHOT_TEMPLATE = (
    "Solve the last problem the way the worked examples are solved. On the final line, "
    'output the answer preceded by "Answer: ".\n\n{examples}\n\nProblem: {question}'
)
DIALOG_FINAL = (
    "Answer from what I told you above, with a short answer. "
    'Output it preceded by "Answer: ".\n\n{question}'
)
TOOL_TEMPLATE = (
    "You can call exactly one of these tools:\n{tools}\n\nUser request: {question}\n"
    'Which tool should be called? On the final line, output the tool name preceded by "Answer: ".'
)


class _UnitOrder(ShortAnswerFacet):
    """Units live in ``item.meta[unit_key]``; subclasses render them."""

    name = ""
    template_id = ""
    template = ""
    unit_key = ""
    min_units, max_units = 2, 8
    opt_in = True

    @property
    def template_sha256(self) -> str:
        return sha256_text(self.template)

    def keep(self, item: Item) -> bool:
        return (
            item.answer is not None
            and self.min_units <= len(item.meta.get(self.unit_key, ())) <= self.max_units
        )

    def n_units(self, item: Item) -> int:
        return len(item.meta[self.unit_key])


class FewShotOrder(_UnitOrder):
    name = "few_shot_order"
    template_id = "fp-few-shot-v1"
    template = FEW_SHOT_TEMPLATE
    unit_key = "exemplars"

    def render(self, item: Item, perm: tuple[int, ...], seed: int = 0, key: tuple = ()) -> Request:
        shots = item.meta[self.unit_key]
        examples = "\n\n".join(f"Problem: {shots[src][0]}\nAnswer: {shots[src][1]}" for src in perm)
        prompt = self.template.format(examples=examples, question=item.question.strip())
        return self.ask(prompt, seed, key)


class DialogTurnOrder(_UnitOrder):
    name = "dialog_turn_order"
    template_id = "fp-dialog-v1"
    template = DIALOG_FINAL
    unit_key = "turns"

    def render(self, item: Item, perm: tuple[int, ...], seed: int = 0, key: tuple = ()) -> Request:
        turns = item.meta[self.unit_key]
        messages: list[tuple[str, str]] = []
        for src in perm:  # each earlier turn: the user states a note, the assistant acknowledges it
            messages += [("user", turns[src]), ("assistant", "Noted.")]
        messages.append(("user", self.template.format(question=item.question.strip())))
        return self.ask(tuple(messages), seed, key)


class ToolDescriptionOrder(_UnitOrder):
    name = "tool_description_order"
    template_id = "fp-tools-v1"
    template = TOOL_TEMPLATE
    unit_key = "tools"

    def render(self, item: Item, perm: tuple[int, ...], seed: int = 0, key: tuple = ()) -> Request:
        tools = item.meta[self.unit_key]
        listed = "\n".join(f"- {tools[src][0]}: {tools[src][1]}" for src in perm)
        prompt = self.template.format(tools=listed, question=item.question.strip())
        return self.ask(prompt, seed, key)
