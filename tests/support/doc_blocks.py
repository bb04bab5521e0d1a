"""The marked code blocks of the docs, and the check that runs one."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import yaml

from flipgate import registry
from flipgate.config import load_models, parse_thresholds
from flipgate.suite.threshold_coverage import check_thresholds
from support.paths import REPO
from support.plans import threshold_plan

MARKER = re.compile(
    r"#\s*(?P<file>(?:\S*/)?models\.yaml|thresholds/[A-Za-z0-9_.-]+\.yaml)"
    r"(?P<excerpt>\s+\(excerpt\))?"
)


FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass
class Block:
    doc: Path
    line: int  # of the opening fence
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"

    @property
    def first(self) -> str:
        return self.text.split("\n", 1)[0].strip()


def blocks(doc: Path) -> list[Block]:
    out, lang, start, body = [], None, 0, []
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if lang is None and fence:
            lang, start, body = fence.group(1), n, []
        elif lang is not None and line.strip() == "```":
            out.append(Block(doc, start, lang, "\n".join(body) + "\n"))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def _merge(shipped: dict, excerpt: object, key: str) -> dict:
    if isinstance(excerpt, list):
        return {**shipped, key: [*shipped[key], *excerpt]}
    assert isinstance(excerpt, dict), f"an excerpt is a list or a mapping, not {type(excerpt)}"
    return {**shipped, **excerpt}


def _text(block: Block, shipped: Path, key: str) -> str:
    """The file a block stands for: itself, or an excerpt merged into the shipped file."""
    body = textwrap.dedent(block.text)
    if not MARKER.fullmatch(block.first).group("excerpt"):  # type: ignore[union-attr]
        return body
    merged = _merge(yaml.safe_load(shipped.read_text()), yaml.safe_load(body), key)
    return yaml.safe_dump(merged, sort_keys=False)


def check_block(block: Block, tmp: Path) -> None:
    registry.suites()
    name = MARKER.fullmatch(block.first).group("file")  # type: ignore[union-attr]
    if name.endswith("models.yaml"):
        path = tmp / "models.yaml"
        path.write_text(_text(block, REPO / "models.yaml", "models"))
        cfg = load_models(path)
        shipped = load_models(REPO / "models.yaml").models
        documented = yaml.safe_load(path.read_text())["models"]
        for model in documented:
            if model["id"] in shipped:
                drift = {
                    k: (v, shipped[model["id"]][k])
                    for k, v in model.items()
                    if k in shipped[model["id"]] and shipped[model["id"]][k] != v
                }
                assert not drift, (
                    f"{block.where}: model {model['id']!r} differs from models.yaml "
                    f"(documented, shipped): {drift}"
                )
        assert cfg.models
        return
    directory = tmp / "thresholds"
    directory.mkdir()
    default = REPO / "thresholds" / "default.yaml"
    (directory / "default.yaml").write_text(default.read_text())
    path = tmp / name
    path.write_text(_text(block, default, "thresholds"))
    thresholds, _ = parse_thresholds(path)
    assert thresholds
    cfg = load_models(REPO / "models.yaml")
    check_thresholds(directory, cfg, *threshold_plan(cfg))
