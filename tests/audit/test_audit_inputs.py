"""Hostile checkpoints and options (issue 20, item 10): each is audited or refused in one line naming the file
(or the option), exit 2, in bounded time; each was an internal error or a hang before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.audit import AuditOptions, run_audit
from sparkdoctor.audit.safetensors import read_header
from tests.audit import builders
from tests.audit.test_checkpoint import TINY, one_line, tiny

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "audit", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def refused(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2 and p.stderr.count("\n") == 1, (p.returncode, p.stderr[-2000:])
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    for word in words:
        assert word in p.stderr, p.stderr


def write_header(path: Path, header: dict, data: int = 2) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0" * data)


@pytest.mark.parametrize("shape", [[10**1500] * 3, [2**64], [2**40, 2**40]], ids=["4500-digits", "2**64", "2**80"])
def test_a_shape_with_an_impossible_element_count_names_the_tensor(tmp_path, shape):
    path = tmp_path / "model.safetensors"
    write_header(path, {"w": {"dtype": "BF16", "shape": shape, "data_offsets": [0, 2]}})
    message = one_line(lambda: read_header(path), "tensor 'w': shape of")
    assert "2**64 elements or more" in message and len(message) < 300


def test_offsets_of_thousands_of_digits_are_refused_in_a_short_line(tmp_path):
    path = tmp_path / "model.safetensors"
    big = "1" * 4000  # json.loads reads up to 4,300 digits; a message must not print them
    raw = (f'{{"w": {{"dtype": "BF16", "shape": [1], "data_offsets": [0, {big}]}}}}').encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0\0")
    message = one_line(lambda: read_header(path), "tensor 'w': data_offsets")
    assert len(message) < 300, message


def test_a_deeply_nested_config_is_one_line(tmp_path):
    folder = tiny(tmp_path / "m")
    (folder / "config.json").write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(cli(folder, "--gpu", "gb10"), "config.json: nested too deeply")


@pytest.mark.parametrize("field, value", [("num_hidden_layers", 10**12), ("hidden_size", 10**4000)])
def test_a_config_number_no_model_has_is_one_line(tmp_path, field, value):
    folder = tiny(tmp_path / "m", config={**TINY, field: value})
    message = one_line(lambda: run_audit(AuditOptions(str(folder), gpu="gb10")), f"{field} is")
    assert "not a real model's size" in message and len(message) < 300


@pytest.mark.parametrize("args, flag", [
    (["--memory", "1e308", "-f", "json"], "--memory"), (["--memory", "inf"], "--memory"),
    (["--bandwidth", "1e308", "-f", "json"], "--bandwidth"), (["--bandwidth", "inf"], "--bandwidth"),
    (["--context", "99999999999999999999"], "--context"), (["--max-num-seqs", str(10**21)], "--max-num-seqs"),
    (["--max-model-len", str(10**30)], "--max-model-len"), (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
])
def test_numbers_past_any_machine_are_refused_naming_the_option(tmp_path, args, flag):
    folder = tiny(tmp_path / "m")
    refused(cli(folder, "--gpu", "gb10", *args), f"{flag} ", "must be a number")


def test_the_largest_real_values_still_audit(tmp_path):
    folder = tiny(tmp_path / "m")
    p = cli(folder, "--gpu", "gb10", "--memory", "1024", "--bandwidth", "8000", "--context", "1000000",
            "--max-num-seqs", "1024", "-f", "json")
    assert p.returncode in (0, 1) and json.loads(p.stdout)["fit"]["memory_gib"] == 1024, p.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_fifo_in_the_checkpoint_is_refused_without_blocking(tmp_path, name):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    builders.write_safetensors(folder / "model.safetensors", [("w", "BF16", [1])])
    (folder / name).unlink()
    os.mkfifo(folder / name)
    refused(cli(folder, "--gpu", "gb10", timeout=60), f"{name}: cannot read: is a FIFO (named pipe), not a regular file")


def test_audit_has_the_run_wide_time_limit(tmp_path):
    folder = tiny(tmp_path / "m")
    refused(cli(folder, "--timeout", "-1"), "--timeout -1.0: give a number of seconds above 0")
    assert cli(folder, "--gpu", "gb10", "--timeout", "60").returncode == 0


def test_a_backtracking_ignore_pattern_of_the_checkpoint_is_stopped_by_the_time_limit(tmp_path):
    """vLLM's `re:` patterns are the checkpoint's to write; one that backtracks without end is cut off after
    0.25 s on one module name (the run's --timeout stops it otherwise), in one line that names it."""
    config = {**TINY, "quantization_config": {"quant_method": "compressed-tensors", "ignore": ["re:.*(a|aa)+$"],
                                              "config_groups": {}}}
    entries = [(f"model.layers.0.mlp.{'a' * 60}b.weight", "BF16", [4, 4]), ("lm_head.weight", "BF16", [100, 64])]
    folder = builders.write_checkpoint(tmp_path / "m", config, entries)
    p = cli(folder, "--gpu", "gb10", "--timeout", "3", timeout=60)
    refused(p, "the checkpoint's ignore pattern 're:.*(a|aa)+$' could not be matched against "
               f"'model.layers.0.mlp.{'a' * 60}b' within 0.25 s")

