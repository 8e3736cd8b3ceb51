"""A checkpoint folder as the audit sees it: its config files and the headers of all its safetensors shards.

Shards come from `model.safetensors.index.json` when there is one (its weight_map must agree with the
headers: a tensor the index places in a shard that does not hold it is a broken download), else from every
`*.safetensors` in the folder. A tensor name in two shards is an error naming both files. Only headers are
read: `Checkpoint.bytes_read` is the sum over shards, and the benchmark and tests hold the audit to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.safetensors import TensorInfo, read_header
from sparkdoctor.inputs import NotJSON, json_answer, kernel_file, read_text

INDEX = "model.safetensors.index.json"


@dataclass
class Checkpoint:
    folder: Path
    config: dict[str, Any]
    tensors: dict[str, TensorInfo]
    shards: list[Path]
    bytes_read: int  # header bytes read, all shards together
    bytes_on_disk: int  # the shards' sizes (what loading the weights would read)


MAX_JSON = 64 * 1024 * 1024  # a config or index file; the largest real index (a 300,000-tensor MoE) is ~30 MB


def read_json(path: Path, required: bool = True) -> dict[str, Any] | None:
    if (real := kernel_file(path)) is not None:  # a link into /proc or /sys (/proc/self/environ, /proc/kmsg)
        raise AuditError(f"{path}: {real} is a kernel file, not a checkpoint's JSON file")
    try:  # a regular file only: a FIFO named config.json is refused, never waited on
        text = read_text(path, MAX_JSON)
    except FileNotFoundError:
        if required:
            raise AuditError(f"{path}: missing (a checkpoint folder has a config.json)") from None
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise AuditError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = json_answer(text)
    except NotJSON as exc:  # "config.json: not valid JSON (...)", "... has a number too long ...", "... nested too deeply ..."
        raise AuditError(f"{path}: {str(exc).removeprefix('is ')}") from None
    if not isinstance(doc, dict):
        raise AuditError(f"{path}: not a JSON object")
    return doc


def load_checkpoint(folder: Path) -> Checkpoint:
    folder = Path(folder)
    config = read_json(folder / "config.json")
    assert config is not None
    shards, expected = _shards(folder)
    tensors: dict[str, TensorInfo] = {}
    read = on_disk = 0
    for shard in shards:
        header = read_header(shard)
        read += header.bytes_read
        on_disk += header.file_size
        for name, tensor in header.tensors.items():
            if name in tensors:
                raise AuditError(f"{shard}: tensor {name!r} is also in {tensors[name].file}: a tensor must live in one shard")
            tensors[name] = tensor
    if expected is not None:
        _agree(folder / INDEX, expected, tensors)
    return Checkpoint(folder, config, tensors, shards, read, on_disk)


def _shards(folder: Path) -> tuple[list[Path], dict[str, str] | None]:
    index = read_json(folder / INDEX, required=False)
    if index is None:
        shards = sorted(folder.glob("*.safetensors"))
        if not shards:
            raise AuditError(f"{folder}: no *.safetensors files (audit reads safetensors headers; .bin, .pt and .gguf are not read)")
        return shards, None
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise AuditError(f"{folder / INDEX}: weight_map must map tensor names to shard file names")
    files = sorted(set(weight_map.values()))
    for name in files:
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            raise AuditError(f"{folder / INDEX}: weight_map names a shard outside the folder: {name!r}")
        if not (folder / name).exists():  # a FIFO or device is there: read_header says what it is
            raise AuditError(f"{folder / INDEX}: weight_map names shard {name!r}, which is not in the folder (an incomplete download?)")
    return [folder / name for name in files], weight_map


def _agree(index: Path, expected: dict[str, str], tensors: dict[str, TensorInfo]) -> None:
    for name, file in expected.items():
        tensor = tensors.get(name)
        if tensor is None or tensor.file != file:
            where = "no shard" if tensor is None else tensor.file
            raise AuditError(f"{index}: weight_map puts {name!r} in {file} but {where} holds it")
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise AuditError(f"{index}: {len(extra)} tensor(s) in the shards are missing from weight_map, e.g. {extra[0]!r}")
