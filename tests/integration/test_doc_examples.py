"""The configuration examples in README.md and docs/**/*.md are checked, so they cannot drift from
what flipgate accepts.

Marker convention: a fenced ```yaml block whose first line is a comment naming the file it
claims to be is checked as that file:

- ``# models.yaml`` (or any path ending in ``models.yaml``): a whole models.yaml, loaded with
  :func:`flipgate.config.load_models`; each of its models that the shipped models.yaml also has
  must agree with it on every key both set (the docs show the shipped roster, not a stale copy).
- ``# thresholds/<name>.yaml``: a whole thresholds file, parsed (:func:`~flipgate.config.
  parse_thresholds`) and checked against the default plan (the shipped models.yaml) as the
  collection-time check does (flipgate.suite.threshold_coverage: every threshold must select a
  cell);
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

import pytest
from support.cards import two_model_grid
from support.doc_blocks import MARKER, blocks, check_block
from support.paths import REPO

from flipgate.__main__ import COMMANDS, main

DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
#: the blocks README.md and docs/ mark today (docs/configuration.md 2, docs/thresholds.md 1,
#: docs/suites/odi.md 1, docs/engine.md 1, docs/servers.md 6, docs/launched-servers.md 1)
MARKED = 12


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
