"""flipgate: a pytest-based model-card conformance suite for ordering robustness."""

__version__ = "0.1.0"


from pathlib import Path

#: what an error message shows of a value
SHOWN_CHARS = 60


class FlipgateError(Exception):
    """A user-facing error: bad config, bad data, a failed backend call. Its message names the
    file, field and value at fault, so no traceback from deep inside is needed."""


def short(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters (a value in a message stays one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def not_utf8(path: Path | str, exc: UnicodeDecodeError, offset: int | None = None) -> FlipgateError:
    """A text file that is not UTF-8, as one line naming its first bad byte and where it is
    (``offset``: into the whole file, when ``exc`` is about one block of it)."""
    byte = exc.object[exc.start : exc.start + 1]
    at = exc.start if offset is None else offset
    return FlipgateError(
        f"{path}: not UTF-8 text: byte {byte!r} at offset {at} (save the file as UTF-8)"
    )
