"""One metadata value of a GGUF file, read from its header without parsing the rest.

``gguf.GGUFReader`` builds every field of the file, the tokenizer's vocabulary included: 3.3 s for
SmolLM2's file (49,152 strings) and 17 s for Gemma 3's (262,144) on a 2-core AVX2 machine, paid by
every process that names a managed server's quantisation. The header is a count of key-value
pairs read in order (GGUF specification, versions 2 and 3: ggml/docs/gguf.md): this walks them,
skipping each value by its declared size, until the key it looks for: 0.2 ms for SmolLM2's
``general.file_type``, 150 ms for Gemma's (after its vocabulary).
``tests/unit/backends/test_gguf_header.py`` checks it against ``GGUFReader``."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

MAGIC = b"GGUF"
#: GGUF value types (the specification's ``gguf_metadata_value_type``) with a fixed size
SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
STRING, ARRAY = 8, 9


class _Header:
    """A cursor over a mapped GGUF file in its byte order."""

    def __init__(self, data: mmap.mmap):
        self.data, self.pos = data, 0
        if data[:4] != MAGIC:
            raise ValueError(f"no GGUF magic (found {bytes(data[:4])!r})")
        self.order = "<"
        (version,) = struct.unpack_from("<I", data, 4)
        if version & 0xFFFF == 0:  # written big-endian: the version reads byte-swapped
            self.order = ">"
        self.pos = 8

    def size(self, fmt: str) -> int:
        return struct.calcsize(self.order + fmt)  # the standard sizes, not the platform's

    def read(self, fmt: str):
        (value,) = struct.unpack_from(self.order + fmt, self.data, self.pos)
        self.pos += self.size(fmt)
        return value

    def string(self) -> str:
        size = self.read("Q")
        end = self.pos + size
        if end > len(self.data):
            raise ValueError("a string runs past the end of the file")
        text = bytes(self.data[self.pos : end]).decode("utf-8", errors="replace")
        self.pos = end
        return text

    def value(self, kind: int, keep: bool):
        """The value of type ``kind`` at the cursor (None when not ``keep``: skipped)."""
        if kind in SCALARS:
            fmt = SCALARS[kind]
            if not keep:
                self.pos += self.size(fmt)
                return None
            return self.read(fmt)
        if kind == STRING:
            if not keep:
                size = self.read("Q")  # (read before the cursor moves past it)
                self.pos += size
                return None
            return self.string()
        if kind == ARRAY:
            item, count = self.read("I"), self.read("Q")
            if item in SCALARS and not keep:
                self.pos += count * self.size(SCALARS[item])
                return None
            values = [self.value(item, keep) for _ in range(count)]
            return values if keep else None
        raise ValueError(f"unknown GGUF value type {kind} at byte {self.pos}")


def header_value(path: Path | str, key: str):
    """The value of metadata ``key`` in the GGUF file at ``path`` (an int, float, bool, str or
    list), or None if the header has no such key. Raises ``OSError`` if the file cannot be read
    and ``ValueError`` if it is not GGUF or is truncated."""
    with open(path, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise ValueError("empty file") from None
    with data:
        try:
            header = _Header(data)
            header.read("Q")  # tensor count
            for _ in range(header.read("Q")):
                name, kind = header.string(), header.read("I")
                found = header.value(kind, keep=name == key)
                if name == key:
                    return found
        except struct.error:
            raise ValueError("the header runs past the end of the file") from None
    return None
