"""The identity of the checkpoint a run served: what it is, not where it lives.

A re-quantized model written to the same folder serves at another speed, so a run is keyed to the model's
identity as well as to its toolchain: a SHA-256 over its config files (config.json, generation_config.json,
the quantization configs) and over every *.safetensors file's header (its 8-byte length and JSON: tensor
names, dtypes, shapes, offsets), read without reading the weights. Two checkpoints with the same identity
have the same architecture, quantization and tensor layout; a change of dtype, quantization or shard layout
changes it. (Retrained weights of identical layout keep it: hashing the weights would read them all.)

Every file is read through sparkdoctor.inputs (opened without blocking, judged by what it really is): a FIFO, a
device or a socket among them is refused, never waited on, and a config file past MAX_CONFIG bytes is not read
whole. Whatever cannot be read leaves the identity unknown (None), as a folder that is not a checkpoint does.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import BinaryIO

from sparkdoctor.inputs import kernel_file, open_regular, read_bytes

CONFIG_FILES = ("config.json", "generation_config.json", "hf_quant_config.json", "quantization_config.json",
                "quant_config.json")
MAX_HEADER = 100 * 2**20  # a safetensors header is JSON; more than this is not a checkpoint header
MAX_CONFIG = 64 * 2**20  # one config file (audit/checkpoint.py's MAX_JSON: the largest real index is ~30 MB)


def identity(folder: str | Path) -> dict[str, object] | None:
    """{"sha256", "config_files", "shards", "header_bytes"} for a local checkpoint folder; None when it is not one
    (no config.json) or cannot be read (a file that is not a regular one, a config file past MAX_CONFIG)."""
    root = Path(folder).expanduser()
    if not (root / "config.json").is_file():
        return None
    digest = hashlib.sha256()
    configs, shards, header_bytes = [], 0, 0
    try:
        for name in CONFIG_FILES:
            if kernel_file(root / name) is not None:
                return None
            try:
                data = read_bytes(root / name, MAX_CONFIG)  # a FIFO or a device is refused (an OSError)
            except FileNotFoundError:
                continue
            digest.update(f"{name}\0".encode())
            digest.update(data)
            configs.append(name)
        for path in sorted(root.rglob("*.safetensors")):
            if kernel_file(path) is not None:  # a link into /proc: /proc/kmsg's read waits for the kernel
                return None
            with open_regular(path) as fh:  # a FIFO named *.safetensors is refused, never waited on
                head = fh.read(8)
                if len(head) != 8:
                    continue
                (size,) = struct.unpack("<Q", head)
                if size > MAX_HEADER:
                    continue
                digest.update(f"{path.relative_to(root)}\0".encode())
                digest.update(head + _read(fh, size))
            shards += 1
            header_bytes += 8 + size
    except OSError:
        return None
    return {"sha256": digest.hexdigest()[:16], "config_files": configs, "shards": shards, "header_bytes": header_bytes}


def _read(fh: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes of an unbuffered file (one read may return fewer)."""
    parts: list[bytes] = []
    left = size
    while left > 0:
        part = fh.read(min(left, 2**24))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)
