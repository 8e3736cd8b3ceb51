"""The header reader: real files written to the format, every way a header can lie, and a fuzz of both."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.safetensors import DTYPE_BITS, MAX_HEADER, read_header
from tests.audit.builders import write_safetensors


def raw_file(path, header: dict | bytes, data: int = 0, length: int | None = None):
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(body) if length is None else length))
        f.write(body)
        f.truncate(8 + len(body) + data)
    return path


def one_line_error(path, match: str):
    with pytest.raises(AuditError) as info:
        read_header(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message, message
    assert match in message, message
    return message


def test_a_written_file_reads_back_exactly_and_only_its_header_is_read(tmp_path):
    entries = [("a.weight", "BF16", [4, 8]), ("a.weight_scale", "F8_E4M3", [4, 1]), ("b", "F4", [3, 2]), ("c", "F32", [])]
    size = write_safetensors(tmp_path / "x.safetensors", entries, {"format": "pt"})
    header = read_header(tmp_path / "x.safetensors")
    assert {n: (t.dtype, list(t.shape), t.nbytes) for n, t in header.tensors.items()} == {
        "a.weight": ("BF16", [4, 8], 64), "a.weight_scale": ("F8_E4M3", [4, 1], 4), "b": ("F4", [3, 2], 3), "c": ("F32", [], 4)}
    assert header.metadata == {"format": "pt"}
    assert header.file_size == size and header.bytes_read == size - (64 + 4 + 3 + 4)


def test_a_file_shorter_than_the_length_prefix(tmp_path):
    (tmp_path / "s.safetensors").write_bytes(b"\x01\x02")
    one_line_error(tmp_path / "s.safetensors", "shorter than the 8-byte header length")


def test_a_header_length_larger_than_the_file(tmp_path):
    one_line_error(raw_file(tmp_path / "l.safetensors", {}, length=10_000), "runs past the end of the file")


def test_a_header_length_over_the_format_limit(tmp_path):
    one_line_error(raw_file(tmp_path / "h.safetensors", {}, length=MAX_HEADER + 1), "over the format's limit")


def test_a_truncated_header(tmp_path):
    good = tmp_path / "g.safetensors"
    write_safetensors(good, [("w", "BF16", [2, 2])])
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:20])
    one_line_error(cut, "runs past the end of the file")


def test_bad_json(tmp_path):
    one_line_error(raw_file(tmp_path / "j.safetensors", b'{"w": {"dtype": '), "not valid JSON")


def test_not_utf8(tmp_path):
    one_line_error(raw_file(tmp_path / "u.safetensors", b'{"\xff": 1}'), "not UTF-8")


def test_a_header_that_is_not_an_object(tmp_path):
    one_line_error(raw_file(tmp_path / "a.safetensors", b"[1, 2]"), "does not start with '{'")


@pytest.mark.parametrize("dtype", ["FP4", "bf16", "Q4_K", "F8_E4M3FN"])
def test_a_dtype_nobody_knows_is_named(tmp_path, dtype):
    path = raw_file(tmp_path / "d.safetensors", {"w": {"dtype": dtype, "shape": [2], "data_offsets": [0, 2]}}, data=2)
    one_line_error(path, f"tensor 'w': unknown dtype {dtype!r}")


def test_shape_against_byte_size(tmp_path):
    path = raw_file(tmp_path / "m.safetensors", {"w": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 16]}}, data=16)
    one_line_error(path, "shape [4, 4] of BF16 is 32 bytes but data_offsets span 16")


def test_offsets_beyond_the_file(tmp_path):
    path = raw_file(tmp_path / "o.safetensors", {"w": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}}, data=4)
    one_line_error(path, "the file is truncated")


def test_overlapping_offsets(tmp_path):
    header = {"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}, "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}}
    one_line_error(raw_file(tmp_path / "v.safetensors", header, data=12), "overlap")


def test_a_hole_between_tensors(tmp_path):
    header = {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]}}
    one_line_error(raw_file(tmp_path / "hole.safetensors", header, data=12), "a hole in the data region before tensor 'b'")


def test_bytes_after_the_last_tensor(tmp_path):
    header = {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}
    one_line_error(raw_file(tmp_path / "t.safetensors", header, data=100), "96 bytes after the last tensor")


def test_a_duplicate_tensor_name(tmp_path):
    body = b'{"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "w": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}}'
    one_line_error(raw_file(tmp_path / "dup.safetensors", body, data=8), "names 'w' twice")


def test_a_duplicate_field_inside_an_entry(tmp_path):
    body = b'{"w": {"dtype": "U8", "dtype": "F32", "shape": [4], "data_offsets": [0, 4]}}'
    one_line_error(raw_file(tmp_path / "dup2.safetensors", body, data=4), "names 'dtype' twice")


def test_a_name_that_spells_a_field_is_not_a_duplicate(tmp_path):
    header = {'x"data_offsets"': {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}
    assert list(read_header(raw_file(tmp_path / "q.safetensors", header, data=4)).tensors) == ['x"data_offsets"']


def test_metadata_must_map_strings_to_strings(tmp_path):
    one_line_error(raw_file(tmp_path / "md.safetensors", {"__metadata__": {"n": 1}}), "__metadata__")


@pytest.mark.parametrize("entry, match", [
    ([1], "not an object"),
    ({"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}, "non-negative integers"),
    ({"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}, "non-negative integers"),
    ({"dtype": "U8", "shape": [1], "data_offsets": [1, 0]}, "not 0 <= begin <= end"),
    ({"dtype": "U8", "shape": [1], "data_offsets": [0]}, "[begin, end]"),
    ({"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "extra": 1}, "unknown field 'extra'"),
    ({"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}, "do not fill whole bytes"),
])
def test_malformed_entries(tmp_path, entry, match):
    one_line_error(raw_file(tmp_path / "e.safetensors", {"w": entry}, data=2), match)


# ---- fuzz -------------------------------------------------------------------------------------------
names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12).filter(lambda s: s != "__metadata__")
entries = st.lists(st.tuples(names, st.sampled_from(sorted(DTYPE_BITS)), st.lists(st.integers(0, 6), max_size=3)),
                   max_size=8, unique_by=lambda e: e[0]).map(
    lambda es: [(n, d, s if (DTYPE_BITS[d] * _prod(s)) % 8 == 0 else s + [2]) for n, d, s in es])


def _prod(shape):
    out = 1
    for d in shape:
        out *= d
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries)
def test_fuzz_any_valid_header_reads_back_exactly(tmp_path, es):
    es = [(n, d, s) for n, d, s in es if (DTYPE_BITS[d] * _prod(s)) % 8 == 0]
    write_safetensors(tmp_path / "f.safetensors", es)
    got = read_header(tmp_path / "f.safetensors").tensors
    assert {n: (t.dtype, list(t.shape)) for n, t in got.items()} == {n: (d, s) for n, d, s in es}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzz_a_mutated_header_is_read_or_refused_in_one_line(tmp_path, data):
    path = tmp_path / "m.safetensors"
    write_safetensors(path, [("a.weight", "BF16", [3, 5]), ("a.weight_scale", "F32", [3, 1]), ("b", "U8", [7])])
    blob = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob)))]
    path.write_bytes(bytes(blob))
    try:
        header = read_header(path)
    except AuditError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:  # whatever survived is self-consistent: the offsets tile the data region exactly
        assert sum(t.nbytes for t in header.tensors.values()) == header.file_size - header.bytes_read
