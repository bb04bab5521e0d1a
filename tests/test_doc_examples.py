"""The configuration examples in README.md and docs/**/*.md are checked, so they cannot drift from
what flipgate accepts.

Marker convention: a fenced ```yaml block whose first line is a comment naming the file it
claims to be is checked as that file:

- ``# models.yaml`` (or any path ending in ``models.yaml``): a whole models.yaml, loaded with
  :func:`flipgate.config.load_models`; each of its models that the shipped models.yaml also has
  must agree with it on every key both set (the docs show the shipped roster, not a stale copy).
- ``# thresholds/<name>.yaml``: a whole thresholds file, parsed (:func:`~flipgate.config.
  parse_thresholds`) and checked against the default plan (the shipped models.yaml) as the
  collection-time check does (flipgate.threshold_check: every threshold must select a cell);
  ``<name>`` is ``default`` or a model id of that plan.
- ``(excerpt)`` after the name: a part of such a file, merged into the shipped file first. An
  excerpt whose YAML is a list holds entries of that file's list (``models:``, ``thresholds:``),
  appended to it; one that is a mapping holds top-level keys (``audit:`` ...), replacing the
  shipped file's.

A ```yaml block whose first line mentions models.yaml or thresholds/ but is not such a marker
fails (a misspelt marker would skip its block), and at least ``MARKED`` blocks must be checked (a
marker removed or renamed would, too). The ``python -m flipgate`` commands in ```bash blocks are
checked as far as is cheap: the command exists and takes every option shown; the ``card`` lines
are run on a GRID cards directory of two models.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from test_cards import two_model_grid

from conftest import threshold_plan
from flipgate import registry
from flipgate.__main__ import COMMANDS, main
from flipgate.config import load_models, parse_thresholds
from flipgate.threshold_check import check_thresholds

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
#: the blocks README.md and docs/ mark today (docs/configuration.md 2, docs/thresholds.md 1,
#: docs/suites/odi.md 1, docs/engine.md 1, docs/servers.md 6, docs/launched-servers.md 1)
MARKED = 12
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


ALL = [b for doc in DOCS for b in blocks(doc)]
YAML = [b for b in ALL if b.lang == "yaml"]
MARKED_BLOCKS = [b for b in YAML if MARKER.fullmatch(b.first)]


def test_every_marker_is_well_formed_and_counted():
    misspelt = [
        f"{b.where}: {b.first!r}"
        for b in YAML
        if b.first.startswith("#")
        and re.search(r"models?\.ya?ml|thresholds?/", b.first)
        and not MARKER.fullmatch(b.first)
    ]
    assert not misspelt, f"not a marker (see this test's docstring): {misspelt}"
    assert len(MARKED_BLOCKS) >= MARKED, [b.where for b in MARKED_BLOCKS]


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


@pytest.mark.parametrize("block", MARKED_BLOCKS, ids=[b.where for b in MARKED_BLOCKS])
def test_marked_block_is_valid(block, tmp_path):
    check_block(block, tmp_path)


# -------------------------------------------------------------------------------- commands

COMMAND_LINES = [
    (b, line.split("#", 1)[0].strip())
    for b in ALL
    if b.lang == "bash"
    for line in b.text.splitlines()
    if line.startswith("python -m flipgate ")
]


@pytest.mark.parametrize("block, line", COMMAND_LINES, ids=[ln for _, ln in COMMAND_LINES])
def test_documented_command_exists_with_its_options(block, line, capsys):
    words = shlex.split(line)[3:]
    assert words and words[0] in COMMANDS, f"{block.where}: {line}: no such command"
    head = words[:2] if words[0] == "export" else words[:1]  # export FORMAT: its own options
    assert main([*head, "--help"]) == 0
    helptext = capsys.readouterr().out
    for option in (w.split("=")[0] for w in words[1:] if w.startswith("--")):
        assert option in helptext, f"{block.where}: {line}: {option} is not an option"


def test_documented_card_commands_work_with_two_models(tmp_path, monkeypatch, capsys):
    """docs/regression.md's ``card`` lines, as written, on a grid_cards/ of two models (the
    shipped NF4 pair's ids): each writes its model cards."""
    lines = [ln for _, ln in COMMAND_LINES if shlex.split(ln)[3] == "card"]
    assert lines
    two_model_grid(tmp_path, ("smollm2-135m-instruct", "smollm2-135m-instruct-nf4"))
    monkeypatch.chdir(tmp_path)  # the commands' default --grid-cards-dir: grid_cards
    for line in lines:
        status = main(shlex.split(line)[3:])
        out, err = capsys.readouterr()
        assert status == 0, f"{line}: {err}"
        assert out.count("merged") >= 1
    assert (tmp_path / "model_cards/smollm2-135m-instruct-nf4/README.md").is_file()
    # docs/exports.md's card line: the .eval_results/ files beside its README.md
    assert (tmp_path / "model_cards/smollm2-135m-instruct/.eval_results").is_dir()


def test_documented_export_commands_work(tmp_path, monkeypatch, capsys):
    """docs/exports.md's ``export`` lines, as written, on a grid_cards/ of the shipped pair: each
    writes its files (arc_challenge maps to a Hub benchmark)."""
    lines = [ln for _, ln in COMMAND_LINES if shlex.split(ln)[3] == "export"]
    assert len(lines) >= 3
    two_model_grid(tmp_path, ("smollm2-135m-instruct", "smollm2-135m-instruct-nf4"))
    monkeypatch.chdir(tmp_path)
    for line in lines:
        status = main(shlex.split(line)[3:])
        out, err = capsys.readouterr()
        assert status == 0, f"{line}: {err}"
    assert (tmp_path / "my-model-repo/.eval_results/flipgate_arc_challenge.yaml").is_file()
    assert len(list((tmp_path / "eee/data/arc_challenge/HuggingFaceTB").rglob("*.json"))) == 2
