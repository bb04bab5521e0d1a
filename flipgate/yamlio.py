"""Strict YAML reading of the files a user writes (models.yaml, thresholds/*.yaml, envelopes).

PyYAML's ``safe_load`` keeps the last of two equal keys in one mapping (``max: 0.25`` then
``max: 1.0`` silently loosens a gate) and expands aliases without limit (a "billion laughs"
file hangs whoever walks the result). :func:`load_strict` refuses both, and every other
malformed file, with one line naming the file, the line and the key or problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from flipgate import FlipgateError, short

#: at most this many aliases (``*name``) in one file
MAX_ALIASES = 100
#: at most this many values in one file with every alias expanded
MAX_NODES = 100_000
#: at most this many levels of nesting, aliases expanded (the configuration files need ~8)
MAX_DEPTH = 50

_MERGE = "tag:yaml.org,2002:merge"
_EXPAND = "write the values out instead"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys, more than a few aliases, and more values
    or nesting (aliases expanded) than a configuration file has."""

    def __init__(self, stream: str, source: str):
        super().__init__(stream)
        self.source = source
        self.aliases = 0
        self.depth = 0
        #: id(node) -> (values, levels) under it with aliases expanded
        self.expanded: dict[int, tuple[int, int]] = {}

    def fail(self, node_or_mark: Node | yaml.Mark | None, problem: str) -> FlipgateError:
        mark = node_or_mark.start_mark if isinstance(node_or_mark, Node) else node_or_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        return FlipgateError(f"{self.source}: {where}{problem}")

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise self.fail(
                    self.peek_event().start_mark,
                    f"more than {MAX_ALIASES} aliases (*name); {_EXPAND}",
                )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise self.fail(
                    self.peek_event().start_mark, f"nested more than {MAX_DEPTH} levels deep"
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        node = super().compose_mapping_node(anchor)
        seen: dict[Any, Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE or not isinstance(key_node, ScalarNode):
                continue  # a merge (<<) may be overridden; complex keys are refused later
            key = self.construct_object(key_node)
            first = seen.setdefault(key, key_node)
            if first is not key_node:
                raise self.fail(
                    key_node,
                    f"duplicate key {short(key)} (first at line {first.start_mark.line + 1}); "
                    "a key may appear once in a mapping: keep one",
                )
        return node

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if node is not None:
            self._expand(node, 1, set())
        return node

    def _expand(self, node: Node, depth: int, open_: set[int]) -> tuple[int, int]:
        """(values, levels) under ``node`` with every alias expanded, ``node`` being ``depth``
        levels down; refuses more than MAX_NODES values, MAX_DEPTH levels, and an alias inside
        its own anchor."""
        if id(node) in open_:
            raise self.fail(node, "an alias (*name) refers to the value that contains it")
        size, levels = self.expanded.get(id(node), (1, 1))
        if id(node) not in self.expanded and isinstance(node, (SequenceNode, MappingNode)):
            open_.add(id(node))
            children = (
                node.value
                if isinstance(node, SequenceNode)
                else [n for pair in node.value for n in pair]
            )
            for child in children:
                child_size, child_levels = self._expand(child, depth + 1, open_)
                size, levels = size + child_size, max(levels, child_levels + 1)
                if size > MAX_NODES:
                    raise self.fail(
                        node, f"aliases (*name) expand to more than {MAX_NODES} values; {_EXPAND}"
                    )
            open_.discard(id(node))
            self.expanded[id(node)] = (size, levels)
        if depth - 1 + levels > MAX_DEPTH:
            raise self.fail(
                node, f"aliases (*name) nest more than {MAX_DEPTH} levels deep; {_EXPAND}"
            )
        return size, levels


def load_strict(text: str, source: Path | str) -> Any:
    """Parse one YAML document; a malformed file, a duplicate key or an alias bomb is one
    FlipgateError line naming ``source``, the line and the problem."""
    loader = _StrictLoader(text, str(source))
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(f"{exc.context or ''} {exc.problem or ''}".split())
        raise loader.fail(mark, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise loader.fail(None, f"not valid YAML: {' '.join(str(exc).split())}") from None
    finally:
        loader.dispose()
