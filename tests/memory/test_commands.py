"""The preflight through the commands: `recipe check RECIPE --model PATH` (JSON, console, SARIF, exit codes) and
`bench RECIPE` refusing a launch that does not fit unless --force, on fixture boxes (SPARKDOCTOR_HOST_ROOT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.memory.conftest import write_recipe
from tests.memory.test_verdict import box


def cli(host_root, *args, timeout=300, env=None):
    env = {**os.environ, **(env or {}), "SPARKDOCTOR_HOST_ROOT": str(host_root)}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_recipe_check_with_a_model_says_what_fits_now(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=64)
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768")
    p = cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--model", qwen3_8b, "--format", "json")
    assert p.returncode == 6, p.stderr  # a warning, below the default --fail-on error; no vLLM in the target: no pass
    doc = json.loads(p.stdout)
    (found,) = [f for f in doc["findings"] if f["kind"] == "memory"]
    assert found["id"] == "memory-fits-with" and found["severity"] == "warn"
    assert doc["memory"]["outcome"] == "fits-with" and doc["memory"]["settings"]["gpu_memory_utilization"] == 0.48
    assert doc["memory"]["need"]["parts"][0] == {"name": "weights", "bytes": 16_381_470_720, "how": "exact",
                                                 "source": "safetensors headers of 4 shard(s)"}
    failing = cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--model", qwen3_8b, "--fail-on", "warn")
    assert failing.returncode == 1
    text = " ".join(failing.stdout.split())
    assert "warn memory-fits-with" in text and "--gpu-memory-utilization 0.48 --max-model-len 32768" in text
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


def test_the_model_given_is_the_one_every_check_of_recipe_check_reads(tmp_path, qwen3_8b):
    """A recipe naming a hub id that is not in the cache, checked with `--model FOLDER`: the memory verdict read the
    folder, but the settings' checks said "model org/not-cached has no local files ... config.json cannot be read"
    and left them unjudged. The checkpoint the user names is the one all of them read."""
    have = box(tmp_path, available_gib=64)
    recipe = write_recipe(tmp_path, "org/not-cached", "--max-model-len", "32768")
    env = {"HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    doc = json.loads(cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--model", qwen3_8b,
                         "--format", "json", env=env).stdout)
    assert doc["model"]["folder"] == str(qwen3_8b) and not doc["model"]["error"], doc["model"]
    assert doc["model"]["max_model_len"], doc["model"]
    alone = json.loads(cli(have.root, "recipe", "check", recipe, "--python", sys.executable, "--format", "json", env=env).stdout)
    assert "has no local files" in alone["model"]["error"], alone["model"]


def test_bench_refuses_a_launch_that_does_not_fit_unless_forced(tmp_path, qwen3_8b):
    have = box(tmp_path, available_gib=64)
    recipe = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768")  # asks 0.9 of 119.7 GiB; 58.5 GiB is free
    p = cli(have.root, "bench", recipe, "--no-store", "--format", "json", "--ready-timeout", "5")
    assert p.returncode == 4, p.stderr
    doc = json.loads(p.stdout)
    message = doc["errors"][0]["message"] if isinstance(doc["errors"][0], dict) else doc["errors"][0]
    assert "memory preflight: the launch does not fit as written" in message and "--force launches it anyway" in message
    assert "it fits with --gpu-memory-utilization 0.48" in message
    # the settings are said once: the line said "it fits with FLAGS; launch with FLAGS"
    assert message.count("--gpu-memory-utilization 0.48") == 1 and "launch with" not in message, message
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
        p, sarif = (subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", str(recipe), "--no-store", "--ready-timeout",
                                    "60", "--format", fmt], capture_output=True, text=True, timeout=300) for fmt in ("json", "sarif"))
    assert p.returncode == 4, p.stderr
    assert sarif.returncode == 4, sarif.stderr  # the same failure as SARIF: the post-mortem is its result
    run, results = sarif_results(sarif.stdout)
    assert run["invocations"][0]["executionSuccessful"] is False
    assert [r["ruleId"] for r in results] == ["postmortem-oom-killed"] and results[0]["level"] == "error"
    assert "Killed process" in results[0]["message"]["text"] and results[0]["locations"][0]["physicalLocation"][
        "artifactLocation"]["uri"].endswith("greedy.toml")
    assert json.loads(p.stdout)["errors"][0]["findings"][0]["id"] == "postmortem-oom-killed"
    message = json.loads(p.stdout)["errors"][0]
    message = message["message"] if isinstance(message, dict) else message
    assert "was killed by SIGKILL" in message and "post-mortem: oom-killed: the kernel's OOM killer killed" in message
    # the kill came from its memory cgroup's limit, not the box's: the advice is that limit
    assert "Killed process" in message and "raise the memory limit of the cgroup it ran in" in message
    assert "MemAvailable fell to" in message  # memory sampled while it started (serve/launch.py)


def fake_vllm_recipe(folder: Path, model: Path, name: str, *flags: str) -> Path:
    """A recipe whose `vllm serve MODEL FLAGS` is bench's streaming stand-in (tests/bench/sse_server.py) behind a
    script named vllm: the preflight sizes it as vLLM, and it serves at once."""
    fake = folder / "bin" / "vllm"
    if not fake.exists():
        fake.parent.mkdir(parents=True, exist_ok=True)
        server = Path(__file__).resolve().parents[1] / "bench" / "sse_server.py"
        fake.write_text(f"#!{sys.executable}\nimport sys, runpy\na = sys.argv\n"
                        "keep = [x for i, x in enumerate(a) if x in ('--host', '--port') or a[i - 1] in ('--host', '--port')]\n"
                        f"sys.argv = [{str(server)!r}, *keep]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
        fake.chmod(0o755)
    recipe = write_recipe(folder, model, *flags, name=name)
    text = recipe.read_text().replace('"vllm"', json.dumps(str(fake)))
    recipe.write_text(text + 'served_model_name = "tiny"\nreadiness_path = "/v1/models"\n')
    return recipe


def sarif_results(text: str) -> tuple[dict, list[dict]]:
    """The log's run and results, the log validated against the SARIF 2.1.0 schema (as tests/test_sarif.py does)."""
    from tests.test_sarif import valid

    log = valid(text)
    (run,) = log["runs"]
    rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
    assert all(r["ruleId"] in rules for r in run["results"])
    return run, run["results"]


def test_bench_sarif_carries_the_preflight_verdict_of_a_run_and_of_a_refused_launch(tmp_path, qwen3_8b):
    """A run that fits is measured and its SARIF holds the preflight's memory-fits at the recipe file; a launch the
    preflight refuses fails (exit 4) with a SARIF log whose invocation failed and whose result is the verdict, at the
    recipe's line that names the flag its remedy changes. JSON carries the same finding in the error entry."""
    have = box(tmp_path, available_gib=64)
    fits = fake_vllm_recipe(tmp_path, qwen3_8b, "fits", "--gpu-memory-utilization", "0.45")
    env = ["--no-store", "--python", sys.executable, "--ready-timeout", "60", "--rounds", "1", "--concurrency", "1",
           "--max-tokens", "4", "--warmup", "0", "--no-correctness"]
    ok = cli(have.root, "bench", fits, *env, "--format", "sarif")
    assert ok.returncode == 0, ok.stderr
    run, results = sarif_results(ok.stdout)
    assert run["invocations"][0]["executionSuccessful"] is True
    assert [r["ruleId"] for r in results] == ["memory-fits"] and results[0]["level"] == "note"
    assert run["properties"]["memory"]["high_water_bytes"] > 0  # sampled on this machine whatever the host root
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("fits.toml")

    refused = write_recipe(tmp_path, qwen3_8b, "--max-model-len", "32768", name="refused")
    p = cli(have.root, "bench", refused, *env, "--format", "sarif")
    assert p.returncode == 4, p.stderr
    run, results = sarif_results(p.stdout)
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 4
    assert "memory preflight" in invocation["toolExecutionNotifications"][0]["message"]["text"]
    (result,) = results
    assert result["ruleId"] == "memory-fits-with" and result["level"] == "warning"
    where = result["locations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"].endswith("refused.toml") and where["region"]["startLine"] == 4  # the command
    as_json = json.loads(cli(have.root, "bench", refused, *env, "--format", "json").stdout)
    assert [f["id"] for f in as_json["errors"][0]["findings"]] == ["memory-fits-with"]


def test_rerun_sarif_names_the_preflight_that_refused_a_re_measurement(tmp_path, qwen3_8b):
    """An A/B recorded as a conclusion on a box with room; after a toolchain change (a VLLM_* variable gone) rerun
    re-measures it on a box where the launch no longer fits: the conclusion is not re-run, and its JSON row and its
    SARIF result carry the preflight's verdict, named by the conclusion and the arm."""
    roomy, tight = box(tmp_path / "roomy", available_gib=119), box(tmp_path / "tight", available_gib=64)
    a = fake_vllm_recipe(tmp_path, qwen3_8b, "a", "--max-model-len", "32768")
    b = fake_vllm_recipe(tmp_path, qwen3_8b, "b", "--max-model-len", "16384")
    ledger = tmp_path / "l.sqlite"
    quick = ["--python", sys.executable, "--ready-timeout", "60", "--rounds", "1", "--concurrency", "1", "--max-tokens", "4",
             "--warmup", "0", "--no-correctness", "--allow-load-difference", "--ledger", ledger]
    ab = cli(roomy.root, "bench", a, "--vs", b, "--pairs", "1", "--conclude", "a-vs-b", *quick, "--format", "json",
             env={"VLLM_SDTEST_MEMORY": "1"})
    assert ab.returncode == 0, ab.stderr
    assert {(f["arm"], f["id"]) for f in json.loads(ab.stdout)["findings"]} == {("A", "memory-fits"), ("B", "memory-fits")}
    stored = json.loads(cli(roomy.root, "history", "--ledger", ledger, "--format", "json").stdout)["runs"]
    assert len(stored) == 2 and all(r["memory_high_water_bytes"] > 0 for r in stored)  # an A/B's runs keep theirs
    again = ["rerun", "--allow-load-difference", "--ledger", ledger]
    done = json.loads(cli(tight.root, *again, "--format", "json").stdout)
    (row,) = done["results"]
    assert row["outcome"] == "not re-run" and [f["id"] for f in row["findings"]] == ["memory-fits-with"], row
    sarif = cli(tight.root, *again, "--format", "sarif")
    run, results = sarif_results(sarif.stdout)
    assert run["automationDetails"]["id"] == "sparkdoctor/rerun/"
    assert [(r["ruleId"], r["properties"]["arm"]) for r in results] == [("memory-fits-with", "a-vs-b")]
    assert results[0]["message"]["text"].startswith("a-vs-b: the launch does not fit as written")


def test_recipe_check_does_not_size_what_it_cannot_by_vllms_rules(tmp_path, qwen3_8b):
    """An SGLang recipe was sized by vLLM's rules and told to launch with --gpu-memory-utilization, a flag SGLang
    does not take: `memory-unknown` now, saying why (bench already left a server that is not vLLM unjudged). A vLLM
    recipe reading its settings from --config FILE was judged at vLLM's defaults, then left unsized; now the file's
    values are sized, each naming the file."""
    have = box(tmp_path, available_gib=64)
    sglang = tmp_path / "sglang.toml"
    command = json.dumps(["python3", "-m", "sglang.launch_server", "--model-path", str(qwen3_8b), "--mem-fraction-static", "0.3"])
    sglang.write_text(f'schema = 1\nname = "sgl"\nmodel = {json.dumps(str(qwen3_8b))}\ncommand = {command}\n')
    (tmp_path / "serve.yaml").write_text("max-model-len: 8192\nmax-num-seqs: 3\n")
    configured = write_recipe(tmp_path, qwen3_8b, "--config", str(tmp_path / "serve.yaml"), name="configured")
    p = cli(have.root, "recipe", "check", sglang, "--python", sys.executable, "--model", qwen3_8b, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    (found,) = [f for f in doc["findings"] if f["kind"] == "memory"]
    assert found["id"] == "memory-unknown" and "the command does not start vLLM" in found["title"], found
    assert doc["memory"]["outcome"] == "unknown" and "--gpu-memory-utilization" not in json.dumps(found)
    p = cli(have.root, "recipe", "check", configured, "--python", sys.executable, "--model", qwen3_8b, "--format", "json")
    doc = json.loads(p.stdout)
    assert doc["memory"]["outcome"] != "unknown", doc["memory"]
    settings = json.dumps(doc["memory"])
    assert "--config " in settings and "max-model-len 8192" in settings and "max-num-seqs 3" in settings
