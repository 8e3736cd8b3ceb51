"""The identity of a served checkpoint (bench/model_identity.py) from a folder that holds what a checkpoint should
not: a FIFO named like a shard or a config, a config file past its cap. Each leaves the identity unknown (None) at
once, never a hang or a whole oversized file in memory; a plain checkpoint still gets its identity."""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from sparkdoctor.bench import model_identity
from sparkdoctor.bench.model_identity import identity

SAFETY_S = 30  # only so that a regression fails instead of hanging the suite


def checkpoint(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    header = json.dumps({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    return folder


def in_thread(folder: Path) -> Any:
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(identity(folder)), daemon=True)
    thread.start()
    thread.join(SAFETY_S)
    assert box, "identity() is still waiting"
    return box[0]


def test_a_plain_checkpoint_has_an_identity(tmp_path):
    ident = identity(checkpoint(tmp_path / "m"))
    assert ident is not None and ident["config_files"] == ["config.json"] and ident["shards"] == 1


@pytest.mark.parametrize("name", ["model-00002-of-00002.safetensors", "generation_config.json"])
def test_a_fifo_in_the_folder_is_refused_not_waited_on(tmp_path, name):
    folder = checkpoint(tmp_path / "m")
    os.mkfifo(folder / name)
    assert in_thread(folder) is None


def test_a_config_file_past_its_cap_is_not_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(model_identity, "MAX_CONFIG", 1024)
    folder = checkpoint(tmp_path / "m")
    assert identity(folder) is not None
    with open(folder / "generation_config.json", "wb") as fh:  # sparse: 1 GiB that takes no disk
        fh.truncate(2**30)
    assert identity(folder) is None
