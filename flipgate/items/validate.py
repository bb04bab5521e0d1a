"""Checks every dataset row passes before it becomes an :class:`Item` (issue #28: rows that were
silently misread). A loader reads its option and answer cells with :func:`option_texts` and
:func:`answer_index` (never ``tuple(cell)`` / ``isinstance(x, int)``), and collects its items in a
:class:`RowItems`, which checks each built item once (:func:`check_item`) and refuses a repeated
item id. :func:`check_data_file` refuses a dataset path that is a folder or a JSON(L) file that is
not UTF-8 before any loader reads it. Every refusal is a one-line FlipgateError naming the file, the
row, the field and the value."""

from __future__ import annotations

import codecs
import gzip
import io
from pathlib import Path
from typing import Any

from flipgate import FlipgateError, not_utf8, short
from flipgate.items.item import Item

#: the most characters of question + options one item may hold: a longer row is refused rather
#: than rendered into K prompts that take minutes each (one 100,000-character option ran > 400 s)
MAX_ITEM_CHARS = 20_000


def _at(field: str | tuple[str, ...], *js: int) -> str:
    """Where options ``js`` are: "field 'options' index 2" ("indices 0 and 3"), or the fields of
    a tuple of one field per option (JudgeBench's "fields 'response_A' and 'response_B'")."""
    if isinstance(field, tuple):
        names = " and ".join(repr(field[j]) for j in js)
        return f"field{'s' if len(js) > 1 else ''} {names}"
    indices = " and ".join(str(j) for j in js)
    return f"field {field!r} {'indices' if len(js) > 1 else 'index'} {indices}"


def _key(text: str) -> str:
    return " ".join(text.split())


def repeated(options: tuple[str, ...] | list[str]) -> tuple[int, int] | None:
    """The first pair of indices (i, j), i < j, whose options are the same text (whitespace
    aside), else None."""
    first: dict[str, int] = {}
    for j, text in enumerate(options):
        i = first.setdefault(_key(text), j)
        if i != j:
            return i, j
    return None


def option_texts(
    value: Any, where: str, field: str | tuple[str, ...] = "options", distinct: bool = True
) -> list[str]:
    """A row's options cell as a list: a list or tuple (not a string, which would split into its
    characters) of non-empty strings (a null or empty option is refused, not dropped: dropping it
    would shift the gold index onto another option), no two the same text unless not
    ``distinct`` (a loader that drops placeholder options first; its item is checked after)."""
    label = field if isinstance(field, str) else ", ".join(field)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise FlipgateError(
            f"{where}: field {label!r} must be a list of option strings (value: {short(value)})"
        )
    for j, text in enumerate(value):
        if not isinstance(text, str) or not text.strip():
            raise FlipgateError(
                f"{where}: {_at(field, j)} is a null, empty or non-text option "
                f"(value: {short(text)}); every option must be a non-empty string"
            )
    pair = repeated(value) if distinct else None
    if pair is not None:
        i, j = pair
        raise FlipgateError(
            f"{where}: {_at(field, i, j)} are the same option "
            f"(value: {short(value[j])}); options must be distinct, or a pick between them "
            f"counts as a flip"
        )
    return list(value)


def answer_index(value: Any, n_options: int, where: str, field: str) -> int:
    """A row's gold index: an int (not a bool: ``true`` is no index) in [0, n_options)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n_options:
        raise FlipgateError(
            f"{where}: field {field!r} value {short(value)} is not an index into the "
            f"{n_options} options (an integer from 0 to {n_options - 1})"
        )
    return value


def check_item(
    item: Item,
    where: str,
    options_field: str | tuple[str, ...] = "options",
    gold_field: str = "answer",
    distinct: bool = True,
) -> Item:
    """``item`` when its options pass :func:`option_texts` (``distinct``: no two the same), its
    gold :func:`answer_index` and its question + options hold at most :data:`MAX_ITEM_CHARS`
    characters; else a FlipgateError."""
    if not isinstance(item.question, str) or not item.question.strip():
        raise FlipgateError(
            f"{where}: the question is null, empty or not text (value: {short(item.question)})"
        )
    if item.options:
        option_texts(item.options, where, options_field, distinct)
    if item.gold is not None:
        answer_index(item.gold, len(item.options), where, gold_field)
    size = len(item.question) + sum(len(o) for o in item.options)
    if size > MAX_ITEM_CHARS:
        longest = max((item.question, *item.options), key=len)
        raise FlipgateError(
            f"{where}: question and options hold {size:,} characters, over the limit of "
            f"{MAX_ITEM_CHARS:,} per item (longest value: {short(longest)}, {len(longest):,} "
            f"characters); shorten or drop the row"
        )
    return item


class RowItems:
    """The items built from one source's rows, in row order: the one place a loader's rows become
    items. :meth:`add` checks each item (:func:`check_item`) and refuses an item id an earlier row
    already gave (two rows with one id would merge into one item). ``distinct=False`` lets options
    repeat: only for the bundled copies of MMLU and CommonsenseQA, whose 9 and 24 items with a
    repeated option (e.g. MMLU business_ethics/test row 2) are kept so that the seed-42 samples of
    the shipped audit stay the same."""

    def __init__(
        self,
        id_field: str,
        options_field: str | tuple[str, ...] = "options",
        gold_field: str = "answer",
        distinct: bool = True,
        unit: str = "row",
    ):
        self.id_field, self.options_field, self.gold_field = id_field, options_field, gold_field
        self.distinct, self.unit = distinct, unit
        self.items: list[Item] = []
        self._rows: dict[str, int] = {}

    def add(self, item: Item, where: str, row: int) -> Item:
        """Check ``item`` (built from row ``row``, described by ``where``) and keep it."""
        check_item(item, where, self.options_field, self.gold_field, self.distinct)
        first = self._rows.setdefault(item.item_id, row)
        if first != row:
            raise FlipgateError(
                f"{where}: field {self.id_field!r} gives item id {short(item.item_id)}, as "
                f"{self.unit} {first} does; item ids must be unique (give each {self.unit} its "
                f"own id)"
            )
        self.items.append(item)
        return item


def check_data_file(path: Path | str, field: str = "data_files", text: bool | None = None) -> Path:
    """A dataset file given by the user: refused when it is a folder, or a text file (``text``;
    default: a ``.json``/``.jsonl`` name) that is not UTF-8, naming the byte and its offset."""
    path = Path(path)
    if path.is_dir():
        raise FlipgateError(f"{path}: field {field!r} names a folder, not a data file")
    if text is None:
        text = path.name.endswith((".json", ".jsonl"))
    if text and path.is_file():
        check_utf8(path)
    return path


def check_utf8(path: Path) -> None:
    """Refuse a text file that is not UTF-8, naming the first bad byte and its offset (read in
    blocks, so a large file is not held in memory; of a ``.gz`` file, the offset into the
    decompressed text)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes of the file before the current block
    f: io.BufferedIOBase = gzip.open(path) if path.name.endswith(".gz") else open(path, "rb")
    with f:
        while True:
            block = f.read(1 << 20)
            pending = len(decoder.getstate()[0])  # bytes of an earlier block not yet decoded
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                raise not_utf8(path, exc, offset - pending + exc.start) from None
            if not block:
                return
            offset += len(block)
