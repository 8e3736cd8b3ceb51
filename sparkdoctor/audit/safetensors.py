"""Read and validate one safetensors header, and nothing else of the file.

A safetensors file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON
(`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}`), then the data
region. The format's own rules (https://github.com/huggingface/safetensors, README "Format" and the Rust
crate's `validate`): the header is at most 100,000,000 bytes and starts with '{'; names are unique; each
tensor's byte size equals its element count times its dtype's width; the offsets index the data region
entirely, in order, without holes or overlaps, so the last end is the size of the data region. Beyond the
format: a shape of more than 64 dimensions (numpy's and PyTorch's limit) is refused, and an element count is
multiplied out only until it reaches 2**64, so a long or huge shape costs linear time, never quadratic.

The audit must never read weights: this module reads exactly 8 + N bytes per file and says so
(`ShardHeader.bytes_read`), which is what lets a 200 GB checkpoint be audited in a second. A header that
breaks any rule above is an AuditError naming the file and the tensor: the byte counts a roofline is built
on are only as good as the header they come from.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.errors import InputError
from sparkdoctor.inputs import NotJSON, json_answer, kernel_file, open_regular

MAX_HEADER = 100_000_000  # the safetensors crate's MAX_HEADER_SIZE

# bits per element of every dtype safetensors defines (safetensors/src/tensor.rs, enum Dtype; 0.8 writes torch's
# float8_e4m3fnuz / float8_e5m2fnuz as F8_E4M3FNUZ / F8_E5M2FNUZ)
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
}


class TensorInfo(NamedTuple):
    """One header entry (a NamedTuple: a 300,000-tensor MoE header must parse in well under a second)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str  # the shard's file name (not the path: reports stay short and anonymous)
    begin: int = 0  # offsets into the data region
    end: int = 0

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class ShardHeader:
    path: Path
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]
    bytes_read: int  # 8 + N: all this module ever read of the file
    file_size: int


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


class _Duplicate(InputError, ValueError):
    code = "safetensors-duplicate"
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


MAX_ELEMENTS = 2**64  # offsets and sizes are u64 in the format; nothing larger is a real tensor
MAX_DIMS = 64  # numpy's and PyTorch's limit; real tensors have a handful (and a long shape must not cost per-dim work)


def _elements(shape: list[int]) -> int | None:
    """The product of `shape` (at most MAX_DIMS non-negative ints), or None once it reaches 2**64: never a
    product of thousands of digits (a zero anywhere makes it 0, however large the rest)."""
    if 0 in shape:
        return 0
    numel = 1
    for d in shape:
        numel *= d
        if numel >= MAX_ELEMENTS:
            return None
    return numel


def _short(value: object) -> str:
    """A value for a message: at most 80 characters, and never a failed 4,300-digit int conversion."""
    try:
        if isinstance(value, list) and len(value) > 8:  # never the repr of a 100 MB list, to show 80 characters
            return f"{value[:8]!r:.72}... ({len(value)} items)"
        return f"{value!r:.80}"
    except ValueError:
        return "(a value holding an integer too long to print)"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_header(path: Path) -> ShardHeader:
    """The validated header of the safetensors file `path`; AuditError (one line naming the file) if it lies."""
    path = Path(path)
    where = f"{path}"
    if (real := kernel_file(path)) is not None:  # a link into /proc or /sys: never a shard (/proc/kmsg's read waits)
        raise AuditError(f"{where}: {real} is a kernel file, not a safetensors file")
    try:
        with open_regular(path) as handle:  # a FIFO or device named *.safetensors is refused, never waited on
            size = os.fstat(handle.fileno()).st_size
            if size < 8:  # said before a byte is read
                raise AuditError(f"{where}: not a safetensors file: {size} bytes, shorter than the 8-byte header length")
            head = handle.read(8)
            if len(head) < 8:
                raise AuditError(f"{where}: the file ended inside its 8-byte header length (it shrank while read)")
            length = int.from_bytes(head, "little")
            if length > MAX_HEADER:  # the number is not shown: these 8 bytes may be a linked file's text (a password)
                raise AuditError(f"{where}: its first 8 bytes, read as the header length, are over the format's limit of "
                                 f"{MAX_HEADER:,} bytes (not a safetensors file, or a corrupt one)")
            if length > size - 8:
                raise AuditError(f"{where}: header length {length} runs past the end of the file ({size} bytes): the file is truncated or not safetensors")
            raw = handle.read(length)
    except OSError as exc:
        raise AuditError(f"{where}: cannot read: {exc.strerror or exc}") from None
    if len(raw) != length:
        raise AuditError(f"{where}: the file ended inside its {length}-byte header (truncated)")
    tensors, metadata = _parse(raw, where)
    _check_layout(tensors, size - 8 - length, where)
    return ShardHeader(path, tensors, metadata, 8 + length, size)


def _parse(raw: bytes, where: str) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    if not raw.startswith(b"{"):
        raise AuditError(f"{where}: the header does not start with '{{': not a safetensors file")
    try:
        text = raw.decode("utf-8")
        doc = json_answer(text)
        # A repeated key is silently dropped by json.loads: every tensor entry spells "data_offsets" once
        # (a name holding those characters is escaped and cannot match), so fewer entries than spellings
        # means a duplicate; only then parse again, slowly, to name it.
        entries = len(doc) - ("__metadata__" in doc) if isinstance(doc, dict) else 0
        if isinstance(doc, dict) and any(raw.count(key) != entries for key in (b'"data_offsets"', b'"dtype"', b'"shape"')):
            json.loads(text, object_pairs_hook=_no_duplicates)
    except _Duplicate as exc:
        raise AuditError(f"{where}: the header names {exc.key!r} twice") from None
    except UnicodeDecodeError as exc:
        raise AuditError(f"{where}: the header is not UTF-8 (byte {exc.start})") from None
    except NotJSON as exc:
        raise AuditError(f"{where}: the header {exc}") from None
    if not isinstance(doc, dict):
        raise AuditError(f"{where}: the header is JSON but not an object")
    metadata = doc.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise AuditError(f"{where}: __metadata__ must map strings to strings")
    file = Path(where).name
    tensors = {name: _tensor(name, entry, where, file) for name, entry in doc.items()}
    return tensors, metadata


def _tensor(name: str, entry: object, where: str, file: str) -> TensorInfo:
    # The common, valid entry takes the first branch (a MoE header holds 300,000 of them); anything odd
    # falls through to _explain, which says exactly what is wrong.
    if type(entry) is dict and len(entry) == 3:
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if type(dtype) is str and (bits := DTYPE_BITS.get(dtype)) and type(shape) is list and type(offsets) is list and len(offsets) == 2:
            begin, end = offsets
            numel = 1
            for d in shape if len(shape) <= MAX_DIMS else (None,):
                if type(d) is not int or d < 0:
                    break
                numel *= d
                if numel >= MAX_ELEMENTS:  # stop before the product grows: _explain names it (unless a 0 is coming)
                    if 0 not in shape:
                        break
                    numel = 0
            else:
                if type(begin) is int and type(end) is int and 0 <= begin <= end and numel * bits == (end - begin) * 8:
                    return TensorInfo(name, dtype, tuple(shape), end - begin, file, begin, end)
    _explain(name, entry, f"{where}: tensor {name!r}")
    raise AssertionError("unreachable")


def _explain(name: str, entry: object, at: str) -> None:
    if not isinstance(entry, dict):
        raise AuditError(f"{at}: its entry is not an object")
    unknown = sorted(set(entry) - {"dtype", "shape", "data_offsets"})
    if unknown:
        raise AuditError(f"{at}: unknown field {unknown[0]!r} (an entry has dtype, shape and data_offsets)")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str):
        raise AuditError(f"{at}: no dtype string")
    if dtype not in DTYPE_BITS:
        raise AuditError(f"{at}: unknown dtype {dtype!r} (safetensors defines {', '.join(DTYPE_BITS)})")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise AuditError(f"{at}: shape must be a list of non-negative integers, got {_short(shape)}")
    if len(shape) > MAX_DIMS:
        raise AuditError(f"{at}: shape has {len(shape)} dimensions; no framework loads a tensor of more than {MAX_DIMS}")
    numel = _elements(shape)
    if numel is None:  # no file holds it; and its digits would not even print
        raise AuditError(f"{at}: shape of {len(shape)} dimensions holds 2**64 elements or more: no file can hold the tensor")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
        raise AuditError(f"{at}: data_offsets must be [begin, end] integers, got {_short(offsets)}")
    begin, end = offsets
    if not 0 <= begin <= end < MAX_ELEMENTS:
        raise AuditError(f"{at}: data_offsets {_short(offsets)} are not 0 <= begin <= end < 2**64")
    bits = numel * DTYPE_BITS[dtype]
    if bits % 8:
        raise AuditError(f"{at}: {numel} elements of {dtype} do not fill whole bytes")
    raise AuditError(f"{at}: shape {_short(shape)} of {dtype} is {bits // 8} bytes but data_offsets span {end - begin}")


def _check_layout(tensors: dict[str, TensorInfo], data_size: int, where: str) -> None:
    """Offsets must tile the data region exactly: in order, no overlap, no hole, no tail."""
    placed = sorted(tensors.values(), key=lambda t: (t.begin, t.end))
    cursor, previous = 0, None
    for tensor in placed:
        if tensor.begin < cursor:
            raise AuditError(f"{where}: tensors {previous!r} and {tensor.name!r} overlap (byte {tensor.begin} < {cursor})")
        if tensor.begin > cursor:
            raise AuditError(f"{where}: a hole in the data region before tensor {tensor.name!r} (bytes {cursor}..{tensor.begin} belong to no tensor)")
        cursor, previous = tensor.end, tensor.name
    if cursor > data_size:
        raise AuditError(f"{where}: tensor {previous!r} ends at byte {cursor} of the data region but the file holds only {data_size}: the file is truncated")
    if cursor < data_size:
        raise AuditError(f"{where}: {data_size - cursor} bytes after the last tensor belong to no tensor")
