"""recipe check judges the VALUES a recipe passes (matrix/vllm-settings.toml through the `serving` condition):
each entry's trigger and near miss through the three recipe formats, model facts from real config.json
files (a folder, a Hugging Face cache snapshot, a hub id with no files: not judged), vLLM's number syntax,
the one validation path, plain check leaving these entries out, and the command's JSON / console / JUnit
output and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sparkdoctor.audit.served_model import recipe_facts
from sparkdoctor.conclusions import recipe_check
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import MatrixError
from sparkdoctor.matrix import load as load_matrix
from sparkdoctor.matrix.conditions.serving import flag_value, parse_number
from sparkdoctor.recipes import load as load_recipe
from tests.gb10 import gb10_facts
from tests.rerun.recipe_values import (  # noqa: F401
    FORMATS,
    dense_config,
    hybrid_config,
    model_folder,
    no_hub_cache,
    recipe_file,
)

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes"
SETTINGS = ("vllm-hybrid-mnbt-below-mamba-block", "vllm-gpu-mem-util-above-uma-headroom",
            "vllm-kv-cache-bytes-above-host-memory", "vllm-max-model-len-above-model")
GB10_MEMORY = 125511680 * 1024  # tests/gb10.py: MemTotal of the healthy fixture (119.7 GiB)


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(None)


def _findings(tmp_path, matrix, fmt, flags, config=None, env=None, facts=None, model=None):
    folder = model or str(model_folder(tmp_path, "model", config if config is not None else hybrid_config()))
    recipe = load_recipe(str(recipe_file(tmp_path, fmt, folder, flags, env)), {})
    assert recipe.format == fmt
    return {f["id"]: f for f in recipe_check.check(recipe, matrix, facts or gb10_facts(), None)}


def _settings(found):
    return {i: f for i, f in found.items() if f["kind"] == "setting"}


# ---- vLLM's number and flag syntax --------------------------------------------------------------

@pytest.mark.parametrize("text,value", [("4096", 4096), ("8k", 8000), ("8K", 8192), ("2G", 2 * 2**30), ("25.6k", 25600),
                                        ("0.9", 0.9), ("-1", -1), ("2.5G", None), ("auto", None), ("nan", None), ("inf", None), ("", None)])
def test_numbers_are_read_as_vllms_parser_reads_them(text, value):
    assert parse_number(text) == value


def test_a_flag_counts_in_every_spelling_and_the_last_one_wins():
    argv = ["vllm", "serve", "m", "--max_num_batched_tokens", "2048", "--enable-prefix-caching", "--max-num-batched-tokens=8k"]
    assert flag_value(argv, "--max-num-batched-tokens") == (True, "8k")
    assert flag_value(argv, "--enable-prefix-caching") == (True, True)
    assert flag_value(argv + ["--no-enable-prefix-caching"], "--enable-prefix-caching") == (True, False)
    assert flag_value(argv, "--gpu-memory-utilization") == (False, None)
    assert flag_value(["--max-model-len", "-1"], "--max-model-len") == (True, "-1")


# ---- one validation path; plain check leaves these entries out -----------------------------------

@pytest.mark.parametrize("when,why", [
    ('{ "--gpu-memory-utilization" = "above 0.85" }', "must be true, false, a comparison"),
    ('{ "gpu_memory_utilization" = ">0.85" }', "not a serve flag"),
    ('{ "model.layers" = 3 }', "not a known fact"),
    ('{ "--max-model-len" = ">model.length" }', "is not a model fact"),
    ('{ "--max-num-batched-tokens" = { test = "<2096", default = 2048 } }', "takes `test` and `unset` only"),
    ('{ "--max-num-batched-tokens" = { test = "<2096", unset = "lots" } }', "neither true/false nor a number"),
    ('{ "--max-num-batched-tokens" = "not multiple of 0" }', "must be true, false"),
    ('{ "--kv-cache-memory-bytes" = ">2.5G" }', "is not a number vLLM reads"),
    ("[]", "must be a table"),
    ('{ "model.quant" = "mxfp4" }', "takes a list of values"),
    ('{ "--kv-cache-dtype" = [] }', "needs at least one non-empty string"),
])
def test_a_malformed_serving_condition_names_the_file_entry_and_field(tmp_path, when, why):
    path = tmp_path / "bad.toml"
    path.write_text(f'component = "t"\n[[entry]]\nid = "t-bad"\ntitle = "t"\nseverity = "warn"\naction = "configure"\n'
                    f'summary = "s"\nremedy = "r"\nrefs = ["https://example.org"]\nwhen.serving = {when}\n')
    with pytest.raises(MatrixError) as exc:
        load_matrix(path)
    assert str(bad := exc.value).startswith(f"{path}") and "t-bad" in str(bad) and "when.serving" in str(bad) and why in str(bad)
    cli = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert cli.returncode != 0 and why in cli.stderr + cli.stdout


def test_plain_check_leaves_the_recipe_entries_out(matrix):
    report = build_report(gb10_facts(), matrix)
    evaluated = {ev.entry.id for ev in report.evaluations}
    assert not evaluated & set(SETTINGS) and "vllm-mamba-align-mnbt" in evaluated
    assert not {u["id"] for u in report.to_dict()["unknown"]} & set(SETTINGS)


# ---- each judgement: trigger and near miss, in every recipe format --------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_hybrid_model_batched_tokens_below_the_mamba_block(tmp_path, matrix, fmt):
    hit = _settings(_findings(tmp_path, matrix, fmt, ["--max-num-batched-tokens", "2048"]))
    f = hit["vllm-hybrid-mnbt-below-mamba-block"]
    assert f["severity"] == "error" and "--max-num-batched-tokens = 2048 (entry: < 2096)" in f["evidence"]
    assert "model.hybrid = true" in f["evidence"]
    # left out: vLLM's GB10 default of 2048 is judged
    unset = _settings(_findings(tmp_path, matrix, fmt, []))["vllm-hybrid-mnbt-below-mamba-block"]
    assert "--max-num-batched-tokens (not set; vLLM's default) = 2048 (entry: < 2096)" in unset["evidence"]
    for near in (["--max-num-batched-tokens", "2096"], ["--max-num-batched-tokens=4k"], ["--no-enable-prefix-caching"]):
        assert "vllm-hybrid-mnbt-below-mamba-block" not in _findings(tmp_path, matrix, fmt, near), near
    dense = _findings(tmp_path, matrix, fmt, ["--max-num-batched-tokens", "2048"], config=dense_config())
    assert "vllm-hybrid-mnbt-below-mamba-block" not in dense and "unjudged:vllm-hybrid-mnbt-below-mamba-block" not in dense
    # a vLLM without the assert (0.33 aligns differently): clear
    fixed = gb10_facts(capabilities={"vllm.mamba_align_assert": False})
    assert "vllm-hybrid-mnbt-below-mamba-block" not in _findings(tmp_path, matrix, fmt, ["--max-num-batched-tokens", "2048"], facts=fixed)


@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_memory_utilization_above_the_uma_headroom(tmp_path, matrix, fmt):
    f = _settings(_findings(tmp_path, matrix, fmt, ["--gpu-memory-utilization", "0.90"]))["vllm-gpu-mem-util-above-uma-headroom"]
    assert f["severity"] == "warn" and "--gpu-memory-utilization = 0.90 = 0.9 (entry: > 0.85)" in f["evidence"]
    unset = _settings(_findings(tmp_path, matrix, fmt, []))["vllm-gpu-mem-util-above-uma-headroom"]
    assert "--gpu-memory-utilization (not set; vLLM's default) = 0.9 (entry: > 0.85)" in unset["evidence"]
    for near in ("0.85", "0.7"):
        assert "vllm-gpu-mem-util-above-uma-headroom" not in _findings(tmp_path, matrix, fmt, ["--gpu-memory-utilization=" + near])
    other_gpu = gb10_facts(arch="sm_100a")
    assert "vllm-gpu-mem-util-above-uma-headroom" not in _findings(tmp_path, matrix, fmt, ["--gpu-memory-utilization", "0.95"], facts=other_gpu)


@pytest.mark.parametrize("fmt", FORMATS)
def test_kv_cache_bytes_above_the_hosts_memory(tmp_path, matrix, fmt):
    # 120G is 120 * 2**30 = 128.8e9 bytes, just above the fixture's 125511680 KiB (128.5e9); 128g is 128e9, just below
    assert 120 * 2**30 > GB10_MEMORY > 128 * 10**9
    f = _settings(_findings(tmp_path, matrix, fmt, ["--kv-cache-memory-bytes", "120G"]))["vllm-kv-cache-bytes-above-host-memory"]
    assert f["severity"] == "error"
    assert f["evidence"] == [f"--kv-cache-memory-bytes = 120G = {120 * 2**30} (120.0 GiB) (entry: > host.memory_total_bytes = {GB10_MEMORY} (119.7 GiB))"]
    assert "vllm-kv-cache-bytes-above-host-memory" not in _findings(tmp_path, matrix, fmt, ["--kv-cache-memory-bytes", "128g"])
    assert "vllm-kv-cache-bytes-above-host-memory" not in _findings(tmp_path, matrix, fmt, [])
    unread = _findings(tmp_path, matrix, fmt, ["--kv-cache-memory-bytes", "120G"], facts=gb10_facts(host_health=None))
    assert "the host's total memory was not read" in unread["unjudged:vllm-kv-cache-bytes-above-host-memory"]["evidence"][0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_max_model_len_above_the_models_config(tmp_path, matrix, fmt):
    f = _settings(_findings(tmp_path, matrix, fmt, ["--max-model-len", "262145"]))["vllm-max-model-len-above-model"]
    assert f["severity"] == "error" and "--max-model-len = 262145 (entry: > model.max_model_len = 262144)" in f["evidence"]
    assert "vllm-max-model-len-above-model" in _findings(tmp_path, matrix, fmt, ["--max-model-len=300k"])
    for near in (["--max-model-len", "262144"], ["--max-model-len", "auto"], []):
        assert "vllm-max-model-len-above-model" not in _findings(tmp_path, matrix, fmt, near), near
    allowed = _findings(tmp_path, matrix, fmt, ["--max-model-len", "300000"], env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert "vllm-max-model-len-above-model" not in allowed


def test_the_longest_context_is_derived_as_vllm_derives_it(tmp_path):
    def longest(config, tokenizer=None):
        return recipe_facts(type("R", (), {"name": "r", "argv": [], "model": str(model_folder(tmp_path, "m", config, tokenizer))})())["model"]["max_model_len"]

    assert longest(dense_config(32768)) == 32768
    assert longest(dense_config(32768, {"rope_type": "linear", "factor": 4.0})) == 131072  # scaled by vLLM
    assert longest(dense_config(131072, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})) == 131072
    assert longest(dense_config(32768), {"model_max_length": 16384}) == 16384
    assert longest(dense_config(32768), {"model_max_length": 1e30}) == 32768  # a tokenizer's "no limit"
    assert longest({**dense_config(4096), "model_max_length": 8192}) == 8192


def test_the_models_kind_and_quantization_are_read_from_its_files(tmp_path):
    def facts(name, config, quant=None):
        folder = model_folder(tmp_path, name, config)
        if quant is not None:
            (folder / "hf_quant_config.json").write_text(json.dumps(quant))
        return recipe_facts(type("R", (), {"name": "r", "argv": [], "model": str(folder)})())["model"]

    gpt_oss = facts("g", {**dense_config(), "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "head_dim": 64,
                          "quantization_config": {"quant_method": "mxfp4"}})
    assert (gpt_oss["type"], gpt_oss["architecture"], gpt_oss["quant"], gpt_oss["head_dim"]) == ("gpt_oss", "GptOssForCausalLM", "mxfp4", 64)
    # ModelOpt writes its algorithm in hf_quant_config.json (older exports) or config.json: both read as "nvfp4"
    assert facts("n", hybrid_config(), {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}})["quant"] == "nvfp4"
    assert facts("c", {**hybrid_config(), "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}})["quant"] == "fp8"
    plain = facts("p", dense_config())
    assert plain["quant"] == "none" and plain["head_dim"] == 256 // 8


@pytest.mark.parametrize("when,facts_model,argv,outcome", [
    ('{ "model.quant" = ["mxfp4"] }', {"quant": "mxfp4"}, [], "match"),
    ('{ "model.quant" = ["mxfp4"] }', {"quant": "nvfp4"}, [], "clear"),
    ('{ "model.architecture" = ["DeepseekV4*"] }', {"architecture": "DeepseekV4ForCausalLM"}, [], "match"),
    ('{ "model.architecture" = ["DeepseekV4*"] }', {"architecture": "DeepseekV3ForCausalLM"}, [], "clear"),
    ('{ "model.quant" = ["mxfp4"] }', {"quant": None, "error": "no local files"}, [], "unknown"),
    ('{ "--kv-cache-dtype" = ["fp8", "fp8_e4m3"] }', {}, ["--kv-cache-dtype=fp8_e4m3"], "match"),
    ('{ "--kv-cache-dtype" = ["fp8", "fp8_e4m3"] }', {}, ["--kv-cache-dtype", "auto"], "clear"),
    ('{ "--kv-cache-dtype" = ["fp8", "fp8_e4m3"] }', {}, [], "clear"),
])
def test_a_list_of_values_tests_a_flag_or_a_text_fact(tmp_path, when, facts_model, argv, outcome):
    path = tmp_path / "m.toml"
    path.write_text(f'component = "t"\n[[entry]]\nid = "t-list"\ntitle = "t"\nseverity = "warn"\naction = "configure"\n'
                    f'summary = "s"\nremedy = "r"\nrefs = ["https://example.org"]\nwhen.serving = {when}\n')
    entry = load_matrix(path).get("t-list")
    recipe = {"name": "r", "argv": ["vllm", "serve", "m", *argv], "model": {"ref": "m", **facts_model}}
    from sparkdoctor.matrix import evaluate
    assert evaluate(entry, gb10_facts(recipe=recipe)).outcome == outcome


# ---- model facts: a folder, a Hugging Face cache snapshot, a hub id with no files -------------------

def test_a_hub_id_with_no_local_files_is_not_judged_and_says_so(tmp_path, matrix):
    found = _findings(tmp_path, matrix, "eugr-v1", ["--max-model-len", "300000"], model="Qwen/Qwen3.6-35B-A3B")
    for entry in ("vllm-hybrid-mnbt-below-mamba-block", "vllm-max-model-len-above-model"):
        f = found[f"unjudged:{entry}"]
        assert f["severity"] == "info" and f["kind"] == "setting"
        assert any("Qwen/Qwen3.6-35B-A3B has no local files" in e for e in f["evidence"]), f["evidence"]
        assert entry not in found


def test_a_model_folder_that_is_not_there_is_not_called_a_hub_id(tmp_path):
    """A recipe whose model is a folder path (`/models/...`, as the recipe format's own example) that is not on this
    machine was said to be "a hub id not in the Hugging Face cache": it is a folder that is not there."""
    from sparkdoctor.audit.served_model import model_facts
    for ref in (str(tmp_path / "no-such-model"), "./models/tiny", "~/no-such-model"):
        error = model_facts(ref)["error"]
        assert "no such folder" in error and "hub id" not in error, error
    assert "a hub id not in the Hugging Face cache" in model_facts("org/not-cached-anywhere")["error"]


def test_a_real_eugr_recipe_judged_from_its_models_cache_snapshot(tmp_path, matrix, monkeypatch):
    """eugr's nemotron-3-nano-nvfp4.yaml leaves --max-num-batched-tokens out; its model (a Nemotron-H hybrid,
    Mamba layers in hybrid_override_pattern) sits in the Hugging Face cache."""
    repo = tmp_path / "hub" / "models--nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
    commit = "0" * 39 + "1"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
    model_folder(repo / "snapshots", commit, {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
                 "num_hidden_layers": len(pattern), "hidden_size": 2688, "num_attention_heads": 32, "num_key_value_heads": 2,
                 "head_dim": 128, "vocab_size": 131072, "max_position_embeddings": 262144, "hybrid_override_pattern": pattern,
                 "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "torch_dtype": "bfloat16"})
    recipe = load_recipe(str(RECIPES / "nemotron-3-nano-nvfp4.yaml"), {})
    served = recipe_facts(recipe)
    assert served["model"]["hybrid"] and served["model"]["mamba_layers"] == pattern.count("M")
    found = {f["id"]: f for f in recipe_check.check(recipe, matrix, gb10_facts(), None, served)}
    assert "--max-num-batched-tokens (not set; vLLM's default) = 2048 (entry: < 2096)" in found["vllm-hybrid-mnbt-below-mamba-block"]["evidence"]
    # its 0.7 and its 262144 (the model's own length) are fine
    assert not {"vllm-gpu-mem-util-above-uma-headroom", "vllm-max-model-len-above-model"} & set(found)
    assert not [i for i in found if i.startswith("unjudged:")]


# ---- the command: JSON, console, JUnit, exit codes ------------------------------------------------

def _cli(recipe, *args):
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", str(recipe), "--python", sys.executable, *args],
                       env=dict(os.environ), capture_output=True, text=True, timeout=300)
    return p


def test_the_command_reports_values_in_json_console_and_junit(tmp_path):
    folder = model_folder(tmp_path, "qwen36-like", hybrid_config())
    recipe = recipe_file(tmp_path, "sparkrun-v2", str(folder), ["--max-num-batched-tokens", "2048", "--gpu-memory-utilization", "0.9",
                                                                "--max-model-len", "300000"])
    p = _cli(recipe, "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["recipe_check_version"] == 1 and doc["failed"] and doc["model"]["hybrid"] is True
    assert doc["model"]["max_model_len"] == 262144 and doc["model"]["folder"] == str(folder)
    ids = [f["id"] for f in doc["findings"] if f["kind"] == "setting"]
    # this interpreter has no vLLM: whether it asserts is unknown, so the Mamba entry is not judged
    assert ids == ["vllm-max-model-len-above-model", "vllm-gpu-mem-util-above-uma-headroom", "unjudged:vllm-hybrid-mnbt-below-mamba-block"]
    console = _cli(recipe)
    text = " ".join(console.stdout.split())  # a piped console wraps at 160 columns, and the tmp paths are long
    assert console.returncode == 1 and f"model {folder}: hybrid (6 linear-attention, 0 Mamba layers), longest --max-model-len 262144" in text
    assert "error vllm-max-model-len-above-model" in text and "--max-model-len = 300000 (entry: > model.max_model_len = 262144)" in text
    junit = _cli(recipe, "--format", "junit")
    assert junit.returncode == 1
    suite = ET.fromstring(junit.stdout).find("testsuite")
    cases = {tc.get("name").split(":", 1)[0] if not tc.get("name").startswith("unjudged:") else "unjudged:" + tc.get("name").split(":")[1]: tc
             for tc in suite.findall("testcase")}
    assert cases["vllm-max-model-len-above-model"].find("failure").get("type") == "error"
    assert cases["vllm-gpu-mem-util-above-uma-headroom"].find("system-out") is not None  # warn, below --fail-on error
    assert cases["unjudged:vllm-hybrid-mnbt-below-mamba-block"].find("skipped") is not None
    assert suite.get("failures") == "1"


def test_exit_codes_follow_fail_on_as_check(tmp_path):
    folder = model_folder(tmp_path, "dense", dense_config())
    recipe = recipe_file(tmp_path, "sparkdoctor", str(folder), ["--gpu-memory-utilization", "0.95", "--max-model-len", "32768"])
    # a warning, below the default --fail-on error; the target (sparkdoctor's venv) has no vLLM: no pass, 6
    assert _cli(recipe, "--format", "json").returncode == 6
    warned = _cli(recipe, "--format", "junit", "--fail-on", "warn")
    assert warned.returncode == 1 and ET.fromstring(warned.stdout).get("failures") == "1"
    good = recipe_file(tmp_path, "sparkdoctor", str(folder), ["--gpu-memory-utilization", "0.8", "--max-model-len", "32768"])
    doc = json.loads(_cli(good, "--format", "json", "--fail-on", "info").stdout)
    assert not [f for f in doc["findings"] if f["kind"] == "setting"] and not doc["failed"]


def test_not_a_multiple_of_and_fact_comparisons_in_a_users_matrix(tmp_path):
    from sparkdoctor.matrix.conditions.serving import eval_serving

    facts = gb10_facts()
    facts.recipe = {"argv": ["vllm", "serve", "m", "--max-num-batched-tokens", "3000", "--block-size", "32"],
                    "model": {"ref": "m", "hybrid": False, "max_model_len": 4096}}
    (check,) = eval_serving({"--max-num-batched-tokens": "not multiple of 256"}, facts)
    assert check.result is True and check.evidence == "--max-num-batched-tokens = 3000 (entry: not a multiple of 256)"
    assert eval_serving({"--block-size": "not multiple of 16"}, facts)[0].result is False
    assert eval_serving({"--max-num-batched-tokens": "<model.max_model_len"}, facts)[0].result is True
    assert eval_serving({"model.hybrid": False, "--enforce-eager": False}, facts)[0].result is True
    assert [c.result for c in eval_serving({"--enforce-eager": True}, facts)] == [False]
    facts.recipe = None
    assert eval_serving({"--enforce-eager": True}, facts)[0].result is None
    facts.recipe = {"argv": "not a list", "model": ["junk"]}  # a snapshot's free-form recipe: unknown, never a crash
    assert [c.result for c in eval_serving({"--enforce-eager": True, "model.hybrid": True}, facts)] == [None, None]


def test_without_python_and_no_vllm_to_judge_against_it_refuses_with_its_own_exit_code(tmp_path):
    """No --python, a command (`vllm` on PATH: none here) naming no environment, and sparkdoctor's own venv has
    no vLLM: no verdict and a distinct exit code, never "no findings" and 0 (a CI gate must not pass on nothing)."""
    from sparkdoctor.exitcodes import EXIT_NO_VLLM

    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin"
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", str(Path(__file__).resolve().parents[1] / "data" / "recipes" / "sparkrun-minimal.yaml")],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert p.returncode == EXIT_NO_VLLM == 6, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == "" and p.stderr.count("\n") == 1
    assert "no vLLM in" in p.stderr and "container scitrera/dgx-spark-vllm:latest" in p.stderr and "--python" in p.stderr


@pytest.mark.parametrize("body", ["kill -SEGV $$", "exit 0"])
def test_a_target_that_cannot_be_probed_is_exit_3_never_a_pass(tmp_path, body):
    """A `--python` that crashes (or is no Python at all) was judged as "vLLM not installed", every entry unknown, exit
    0: a CI gate (and the sparkrun plugin's) passed on nothing. It is check's exit 3, one line, as in fix and whatif."""
    from sparkdoctor.exitcodes import EXIT_UNPROBEABLE

    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\n{body}\n")
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", "tiny-cpu", "--python", str(python), "--format",
                        "json"], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert p.returncode == EXIT_UNPROBEABLE == 3, (p.returncode, p.stdout[-2000:], p.stderr)
    assert json.loads(p.stdout)["errors"][0]["type"] == "TargetUnprobeable"
    assert p.stderr.count("\n") == 1 and "the target could not be probed" in p.stderr
