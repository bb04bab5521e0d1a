"""Markdown text safe to paste into a GRID card, a comparison table or a pull request: the one
escape every user-supplied string goes through (:mod:`flipgate.cards.build`,
:mod:`flipgate.regression.table`, :mod:`flipgate.exports.model_card`)."""

from __future__ import annotations

_MD_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\\": "\\\\",
        "`": "\\`",
        "|": "\\|",
        "[": "\\[",
        "]": "\\]",
    }
)


def md_escape(value) -> str:
    """``value`` as inert Markdown text, safe in a table cell: HTML (``& < >``) as entities,
    backslash, backtick, ``|`` and ``[ ]`` backslash-escaped (no code span, no column break, no
    link), line breaks as ``<br>``. Every user-supplied string (ids, names, labels, ``why`` texts,
    receipt values) goes through here before it reaches a card's Markdown; None is rendered as –."""
    if value is None:
        return "–"
    text = str(value).translate(_MD_ESCAPES)
    return "<br>".join(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
