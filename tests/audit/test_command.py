"""`sparkdoctor audit` end to end, in a subprocess: console and JSON, exit codes, one-line errors, GPU
detection through nvidia-smi, and proof from the kernel's own I/O counters that only headers are read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit import builders

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def run(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with no nvidia-smi unless a test puts one there
    bin_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "SPARKDOCTOR_DEBUG", "HF_HUB_CACHE")}
    env.update(PYTHONPATH=str(REPO), PATH=f"{bin_dir}{os.pathsep}/usr/bin:/bin", HF_HOME=str(tmp_path / "hf"), COLUMNS="160")

    def call(*args, timeout: float = 300, prefix=()):
        return subprocess.run([sys.executable, *prefix, "-m", "sparkdoctor", "audit", *map(str, args)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout)

    call.bin = bin_dir
    return call


def test_console_shows_the_table_ceiling_and_fit(run, qwen3_8b):
    p = run(qwen3_8b["nvfp4"], "--context", "512", "--kv-cache-dtype", "fp8")
    assert p.returncode == 0, p.stderr
    for text in ("attention (q/k/v/o)", "NVFP4", "lm_head", "ceiling at 273 GB/s (no GPU detected: GB10 assumed): 52.6 tok/s",
                 "unquantized (BF16/F16/F32) share of weight bytes read: 24.2%", ": fits", "quantization: NVFP4 W4A4"):
        assert text in p.stdout, (text, p.stdout)


def test_json_is_versioned_and_alone_on_stdout(run, qwen3_8b):
    p = run(qwen3_8b["fp8-dynamic"], "--format", "json", "--bandwidth", "273", "--context", "512", "--kv-cache-dtype", "fp8")
    assert p.returncode == 0 and p.stderr == ""
    doc = json.loads(p.stdout)
    assert doc["audit_version"] == 1
    assert doc["roofline"]["ceiling_tok_s"] == pytest.approx(33.16, abs=0.01)
    assert doc["roofline"]["bandwidth_source"] == "--bandwidth"
    assert {g["group"] for g in doc["groups"]} == {"attention", "mlp", "embeddings", "lm_head", "norms"}
    assert doc["per_token"]["read_by_format"].keys() == {"FP8 per-channel", "BF16"}


def test_a_config_tensor_disagreement_exits_1(run, tmp_path):
    cfg = builders.load_config("qwen3-8b", "nvfp4")
    cfg.update(num_hidden_layers=1)
    cfg["quantization_config"]["ignore"] = []
    folder = builders.write_checkpoint(tmp_path / "m", cfg, builders.qwen3_dense(cfg, "nvfp4"))
    p = run(folder, "--gpu", "gb10")
    assert p.returncode == 1
    assert "config vs tensors lm_head: stored BF16, but quantization_config.ignore does not exclude it" in " ".join(p.stdout.split())


def test_not_fitting_exits_1(run, qwen3_8b):
    p = run(qwen3_8b["nvfp4"], "--gpu", "gb10", "--max-num-seqs", "64", "--format", "json")
    assert p.returncode == 1 and json.loads(p.stdout)["fit"]["fits"] is False


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/model"], "no such folder"),
    (["--format", "yaml", "x"], "--format yaml: choose one of console, json"),
    (["{model}", "--gpu", "v100x"], "--gpu v100x: not a known GPU"),
])
def test_errors_are_one_line_exit_2(run, qwen3_8b, args, message):
    p = run(*[a.replace("{model}", str(qwen3_8b["nvfp4"])) for a in args])
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr


def test_a_corrupt_shard_is_one_line_naming_the_file(run, tmp_path, qwen3_8b):
    folder = tmp_path / "bad"
    folder.mkdir()
    for f in qwen3_8b["nvfp4"].iterdir():
        (folder / f.name).symlink_to(f)
    shard = folder / "model-00002-of-00002.safetensors"
    shard.unlink()
    shard.write_bytes((10**9).to_bytes(8, "little") + b"{}")
    p = run(folder)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert f"{shard}: its first 8 bytes, read as the header length, are over the format's limit" in p.stderr


def fake_smi(bin_dir: Path, line: str) -> None:
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{line}'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)


def test_the_detected_gpu_sets_the_bandwidth(run, qwen3_8b):
    fake_smi(run.bin, "0, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.95.05")
    doc = json.loads(run(qwen3_8b["nvfp4"], "--format", "json").stdout)
    assert (doc["roofline"]["bandwidth_gbs"], doc["roofline"]["bandwidth_source"]) == (3350, "detected NVIDIA H100 80GB HBM3")
    fake_smi(run.bin, "0, NVIDIA Tesla T4, 7.5, 15360, 580.95.05")
    doc = json.loads(run(qwen3_8b["nvfp4"], "--format", "json").stdout)
    assert doc["roofline"]["bandwidth_gbs"] == 273 and "not in the table: GB10 assumed" in doc["roofline"]["bandwidth_source"]


IO_PROBE = """
import atexit, sys
def report():
    with open("/proc/self/io") as f:
        sys.stderr.write("IO " + " ".join(l.split()[1] for l in f if l.startswith(("rchar", "read_bytes"))) + "\\n")
atexit.register(report)
sys.argv = ["sparkdoctor"] + sys.argv[1:]
from sparkdoctor.cli import main
main()
"""


def test_only_headers_are_read_kernel_io_counters(run, qwen36, tmp_path):
    """25 GB of checkpoint on paper; the process reads its 18 MB of headers plus its own Python modules."""
    probe = tmp_path / "probe.py"
    probe.write_text(IO_PROBE)
    p = subprocess.run([sys.executable, str(probe), "audit", str(qwen36), "--format", "json", "--gpu", "gb10"], cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rchar = int(p.stderr.split("IO ")[1].split()[0])
    assert doc["headers"]["checkpoint_bytes"] > 25e9
    assert doc["headers"]["bytes_read"] <= rchar < doc["headers"]["bytes_read"] + 64 * 2**20
