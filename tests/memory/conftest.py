"""Checkpoints (real configs, sparse shards: tests/audit/builders.py) and recipes written the ordinary way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkdoctor.recipes import load
from tests.audit import builders


@pytest.fixture(scope="session")
def qwen3_8b(tmp_path_factory) -> Path:
    """Qwen3-8B in BF16: 36 layers, 8 KV heads of 128, a 151,936-token vocabulary, 16.4 GB of weights on paper."""
    return builders.qwen3_8b(tmp_path_factory.mktemp("models") / "qwen3-8b", None)


def write_recipe(folder: Path, model: Path | str, *flags: str, name: str = "probe") -> Path:
    """A recipe in sparkdoctor's TOML format serving `model` with `flags`."""
    path = folder / f"{name}.toml"
    command = json.dumps(["vllm", "serve", str(model), *flags])
    path.write_text(f'schema = 1\nname = "{name}"\nmodel = {json.dumps(str(model))}\ncommand = {command}\n')
    return path


def recipe(folder: Path, model: Path | str, *flags: str, name: str = "probe"):
    return load(write_recipe(folder, model, *flags, name=name))
