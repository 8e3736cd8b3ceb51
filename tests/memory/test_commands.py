"""The preflight through the commands: `recipe check RECIPE --model PATH` (JSON, console, SARIF, exit codes) and
`bench RECIPE` refusing a launch that does not fit unless --force, on fixture boxes (SPARKDOCTOR_HOST_ROOT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.memory.conftest import write_recipe
from tests.memory.test_verdict import box


def cli(host_root, *args, timeout=300):
    env = {**os.environ, "SPARKDOCTOR_HOST_ROOT": str(host_root)}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_recipe_check_with_a_model_says_what_fits_now(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=64)
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768")
    p = cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--model", qwen3_8b, "--format", "json")
    assert p.returncode == 0, p.stderr  # a warning, below the default --fail-on error
    doc = json.loads(p.stdout)
    (found,) = [f for f in doc["findings"] if f["kind"] == "memory"]
    assert found["id"] == "memory-fits-with" and found["severity"] == "warn"
    assert doc["memory"]["outcome"] == "fits-with" and doc["memory"]["settings"]["gpu_memory_utilization"] == 0.5
    assert doc["memory"]["need"]["parts"][0] == {"name": "weights", "bytes": 16_381_470_720, "how": "exact",
                                                 "source": "safetensors headers of 4 shard(s)"}
    failing = cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--model", qwen3_8b, "--fail-on", "warn")
    assert failing.returncode == 1
    text = " ".join(failing.stdout.split())
    assert "warn memory-fits-with" in text and "--gpu-memory-utilization 0.5 --max-model-len 32768" in text
    sarif = json.loads(cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--model", qwen3_8b,
                           "--format", "sarif").stdout)
    assert "memory-fits-with" in {r["ruleId"] for r in sarif["runs"][0]["results"]}


def test_recipe_check_without_a_model_leaves_memory_out_and_a_bad_model_is_one_line(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=64)
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768")
    doc = json.loads(cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--format", "json").stdout)
    assert doc["memory"] is None and not [f for f in doc["findings"] if f["kind"] == "memory"]
    bad = cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--model", tmp_path / "nowhere")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "nowhere" in bad.stderr


def test_bench_refuses_a_launch_that_does_not_fit_unless_forced(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=64)
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768")  # asks 0.9 of 119.7 GiB; 60 GiB is free
    p = cli(have.root, "bench", recipe, "--no-store", "--format", "json", "--ready-timeout", "5")
    assert p.returncode == 4, p.stderr
    doc = json.loads(p.stdout)
    message = doc["errors"][0]["message"] if isinstance(doc["errors"][0], dict) else doc["errors"][0]
    assert "memory preflight: the launch does not fit as written" in message and "--force launches it anyway" in message
    assert "--gpu-memory-utilization 0.5" in message
    forced = cli(have.root, "bench", recipe, "--no-store", "--force", "--ready-timeout", "5")
    # forced past the preflight, the launch itself is what fails here (no `vllm` on this PATH)
    assert forced.returncode == 4 and "memory preflight" not in forced.stderr.splitlines()[-1], forced.stderr
    assert len(p.stderr.strip().splitlines()) <= 1


def test_a_launch_killed_by_the_real_oom_killer_gets_its_post_mortem(tmp_path):
    """bench launches a 'server' that joins a 64 MiB memory cgroup and allocates 300 MiB: the real OOM killer
    kills it before it is ready, and bench's one-line failure names the cause from the real kernel log."""
    from tests.memory.cgroups import limited

    with limited(64 * 2**20) as group:
        grab = "b = [bytearray(2**20) for _ in range(300)]"
        recipe = tmp_path / "greedy.toml"
        command = ["sh", "-c", f"echo $$ > {group}/cgroup.procs && exec {sys.executable} -c '{grab}'"]
        recipe.write_text(f'schema = 1\nname = "greedy"\ncommand = {json.dumps(command)}\n')
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", str(recipe), "--no-store", "--ready-timeout", "60",
                            "--format", "json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 4, p.stderr
    message = json.loads(p.stdout)["errors"][0]
    message = message["message"] if isinstance(message, dict) else message
    assert "was killed by SIGKILL" in message and "post-mortem: oom-killed: the kernel's OOM killer killed" in message
    assert "Killed process" in message and "--gpu-memory-utilization" in message
    assert "MemAvailable fell to" in message  # memory sampled while it started (serve/launch.py)
