"""Reading recipes: our TOML, eugr v1 YAML and sparkrun v2 YAML into one Recipe, on real recipes written out
from their repositories (tests/data/recipes) and on small bad ones. Fast: no server is started."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor import recipes
from sparkdoctor.matrix import load as load_matrix
from sparkdoctor.recipes import RecipeError

DATA = Path(__file__).resolve().parent.parent / "data" / "recipes"
REPO = Path(__file__).resolve().parent.parent.parent


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---- eugr v1 -----------------------------------------------------------------------------------------------------
def test_eugr_doubled_braces_are_literal_and_env_ints_are_text():
    r = recipes.load(DATA / "deepseek-v4-flash.yaml")
    assert r.format == "eugr-v1"
    i = r.argv.index("--compilation-config")
    assert r.argv[i + 1] == '{"cudagraph_mode":"FULL_AND_PIECEWISE","custom_ops":["all"]}'
    assert r.argv[r.argv.index("--default-chat-template-kwargs") + 1] == '{"thinking":true}'
    assert r.env["VLLM_USE_DEEP_GEMM"] == "0" and r.env["NCCL_DEBUG"] == "WARN"
    assert r.served_model_name == "deepseek-v4-flash" and r.model == "deepseek-ai/DeepSeek-V4-Flash"
    # cluster_only: not turned into a solo launch
    assert r.argv[r.argv.index("--tensor-parallel-size") + 1] == "2"
    assert "--distributed-executor-backend" in r.argv
    assert "cluster:2" in r.needs and r.container == "vllm-node-dsv4"
    assert r.extras["build_args"][0] == "--vllm-repo"


def test_eugr_duplicate_key_is_reported_with_its_lines():
    r = recipes.load(DATA / "nemotron-3-super-nvfp4.yaml")
    assert r.container == "vllm-node"
    assert any("'container' appears twice (lines 7 and 10)" in w for w in r.warnings), r.warnings


def test_eugr_solo_launch_forces_tp1_and_drops_the_executor_backend_unless_overridden():
    r = recipes.load(DATA / "nemotron-3-super-nvfp4.yaml")
    assert r.argv[r.argv.index("--tensor-parallel-size") + 1] == "1"
    assert "--distributed-executor-backend" not in r.argv and "ray" not in r.argv
    assert r.sources["param:tensor_parallel"].startswith("solo launch")
    r2 = recipes.load(DATA / "nemotron-3-super-nvfp4.yaml", {"tp": "2", "port": "9000", "gpu_mem": "0.5"})
    assert r2.argv[r2.argv.index("--tensor-parallel-size") + 1] == "2"
    assert r2.port == 9000 and r2.argv[r2.argv.index("--gpu-memory-utilization") + 1] == "0.5"
    assert r2.sources["param:port"] == "--set"


def test_eugr_benchmark_block_becomes_the_workload_and_an_empty_env_is_empty():
    r = recipes.load(DATA / "nemotron-3-nano-nvfp4.yaml")
    assert r.env == {}
    assert r.workload["max_tokens"] == 128 and r.workload["concurrency"] == [1, 2, 5, 10] and "depth" not in r.workload
    from sparkdoctor.bench.workload import from_recipe

    assert from_recipe(r.workload, "x").concurrency == (1, 2, 5, 10)  # the recipe can be benched as it is
    assert r.extras["mods"] == ["mods/nemotron-nano"]


def test_eugr_missing_template_key_is_named(tmp_path):
    path = write(tmp_path, "bad.yaml", 'recipe_version: "1"\nname: x\ncontainer: c\ndefaults: {port: 1}\n'
                                      "command: vllm serve m --port {port} --max-model-len {max_model_len}\n")
    with pytest.raises(RecipeError) as err:
        recipes.load(path)
    msg = str(err.value)
    assert "bad.yaml" in msg and "'command'" in msg and "{max_model_len}" in msg and "port" in msg
    assert "\n" not in msg


def test_eugr_missing_required_field_is_named(tmp_path):
    path = write(tmp_path, "nocontainer.yaml", 'recipe_version: "1"\nname: x\ncommand: vllm serve m\n')
    with pytest.raises(RecipeError, match=r"nocontainer.yaml: required field 'container' is missing"):
        recipes.load(path)


def test_unknown_override_lists_the_parameters(tmp_path):
    with pytest.raises(RecipeError, match=r"--set nope: the recipe has no parameter 'nope' \(its parameters: .*max_model_len"):
        recipes.load(DATA / "nemotron-3-nano-nvfp4.yaml", {"nope": "1"})


def test_env_override_and_fingerprint_ignores_host_and_port():
    base = recipes.load(DATA / "nemotron-3-nano-nvfp4.yaml")
    moved = recipes.load(DATA / "nemotron-3-nano-nvfp4.yaml", {"port": "9001", "host": "127.0.0.1"})
    assert moved.port == 9001 and moved.fingerprint() == base.fingerprint()
    envd = recipes.load(DATA / "nemotron-3-nano-nvfp4.yaml", {"env.CUTE_DSL_ARCH": "sm_121a"})
    assert envd.env == {"CUTE_DSL_ARCH": "sm_121a"} and envd.sources["env:CUTE_DSL_ARCH"] == "--set"
    assert envd.fingerprint() != base.fingerprint()
    longer = recipes.load(DATA / "nemotron-3-nano-nvfp4.yaml", {"max_model_len": "4096"})
    assert longer.fingerprint() != base.fingerprint()


# ---- sparkrun v2 -------------------------------------------------------------------------------------------------
def test_sparkrun_without_command_builds_one_from_defaults():
    r = recipes.load(DATA / "sparkrun-minimal.yaml", {"port": "9000"})
    assert r.format == "sparkrun-v2"
    # sparkrun 0041b8f vllm_distributed.py _build_base_command: -tp first, then VLLM_FLAG_MAP in its order
    assert r.argv == ["vllm", "serve", "Qwen/Qwen3-1.7B", "-tp", "1", "--port", "9000"]
    assert r.port == 9000 and r.container == "scitrera/dgx-spark-vllm:latest"


def test_sparkrun_injects_model_substitutes_iteratively_and_keeps_unknown_placeholders():
    r = recipes.load(DATA / "sparkrun-templated.yaml")
    assert r.argv[:3] == ["vllm", "serve", "Qwen/Qwen3.6-35B-A3B-NVFP4"]
    assert r.served_model_name == "qwen36-nvfp4"  # {short_name}-nvfp4, resolved in a second round
    assert r.argv[r.argv.index("--speculative-config") + 1] == '{"method":"mtp","num_speculative_tokens":3}'
    assert r.argv[-2:] == ["--tool-call-parser", "{tool_parser}"]
    assert any("{tool_parser}" in w for w in r.warnings)
    assert r.env["HF_TOKEN"] == "${HF_TOKEN}"  # passed literally, never expanded
    assert r.extras["metadata"]["quant_bits"] == 4 and r.description.startswith("Qwen3.6")


def test_a_shell_expansion_in_a_sparkrun_command_is_not_a_placeholder_left_as_written(tmp_path):
    """A real recipe (mfellner/sparkrun-recipes, deepseek-v4-flash-0731-dspark-dual-spark-1m.yaml) writes
    `export VLLM_HOST_IP="${NODE_IP}"` before `exec vllm serve`: its shell fills `${NODE_IP}`, and sparkrun (which has
    no NODE_IP default) leaves the braces to it. Reported as a sparkrun placeholder with no value, it sent the reader
    looking for a missing default; it is what makes the line a shell line, which is said instead."""
    path = write(tmp_path, "v2.yaml", 'model: org/m\ndefaults: {port: 8000}\ncommand: |\n  export VLLM_HOST_IP="${NODE_IP}";\n'
                                      "  exec vllm serve {model} --port {port} --download-dir ${HF_HOME:-/x} --tool-call-parser {tool_parser}\n")
    r = recipes.load(path)
    left = [w for w in r.warnings if "placeholders left as written" in w]
    assert len(left) == 1 and left[0].endswith("(no value for them): {tool_parser}"), r.warnings
    assert r.shell == "';'" and "--download-dir" in r.argv


def test_sparkrun_doubled_braces_collapse_and_unknown_defaults_are_dropped(tmp_path):
    path = write(tmp_path, "v2.yaml", "model: org/m\ndefaults: {port: 8000, lm_head_dtype: bf16}\n")
    r = recipes.load(path)
    assert "lm_head_dtype" not in " ".join(r.argv) and any("lm_head_dtype" in w for w in r.warnings)
    path = write(tmp_path, "v2b.yaml", "model: org/m\ncommand: vllm serve {model} --compilation-config '{{\"level\":3}}'\n")
    assert recipes.load(path).argv[-1] == '{"level":3}'


def test_the_sparkrun_recipe_of_the_docs_reads_as_sparkrun_reads_it(tmp_path):
    """docs/sparkrun.md's example, copied verbatim: `recipe_version: "2"` with `mods:` was taken for an eugr v1 recipe
    ("required field 'name' is missing"; sparkrun names a recipe after its file and reads `mods` as its own), and its
    `--port {port}`, a placeholder sparkrun's launch fills, was "not a number"."""
    text = (DATA.parents[2] / "docs" / "sparkrun.md").read_text()
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert 'recipe_version: "2"' in example and "mods:" in example and "{port}" in example
    r = recipes.load(write(tmp_path, "qwen3-small.yaml", example))
    assert r.format == "sparkrun-v2" and r.name == "qwen3-small" and r.extras["mods"] == ["fix-qwen3-tool-parser"]
    assert r.argv[:3] == ["vllm", "serve", "Qwen/Qwen3-0.6B"] and r.port is None
    assert any("{port}" in w for w in r.warnings)
    with pytest.raises(RecipeError, match="recipe_version"):  # no version declared: mods still say eugr, which needs one
        recipes.load(write(tmp_path, "no-version.yaml", "name: x\ncontainer: c\ncommand: vllm serve m\nmods: [a]\n"))


def test_sparkrun_needs_a_model(tmp_path):
    path = write(tmp_path, "nomodel.yaml", "runtime: vllm\ndefaults: {port: 8000}\n")
    with pytest.raises(RecipeError, match=r"nomodel.yaml: required field 'model' is missing"):
        recipes.load(path)


@pytest.mark.parametrize("text, said", [
    # spark-arena/recipe-registry .sparkrun/registry.yaml (307578001460733fcb9335d0e84f8d3e38e40552), its head
    ("registries:\n  - name: official\n    recipes: official-recipes\n    benchmarks: benchmarking\n",
     "a sparkrun registry index (its `registries:` list the folders that hold recipes), not a recipe"),
    # styles01/sparkrun-recipes benchmarking/qwen-122b-3lane-256k.yaml (5af316e1064c03ee5f82b2c698ed3436f6366a31), its head
    ("framework: llama-benchy\nmetadata:\n  description: Qwen 122B 3-lane 256K benchmark profile\nargs:\n  pp: [2048]\n  tg: [128]\n",
     "a sparkrun benchmark profile (`framework: llama-benchy`), not a recipe"),
])
def test_a_registry_or_benchmark_file_of_a_recipe_repository_is_named_for_what_it_is(tmp_path, text, said):
    """A new user who clones a recipe registry and names the first YAML file in it was told "required field 'model' is
    missing (sparkrun recipes name the model they serve)", as if the recipe were broken."""
    with pytest.raises(RecipeError, match=rf"^{tmp_path}/f.yaml: {re.escape(said)}; name a recipe file"):
        recipes.load(write(tmp_path, "f.yaml", text))


def test_bad_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "broken.yaml", "model: a\ndefaults:\n  port: [1,\n")
    with pytest.raises(RecipeError, match=r"broken.yaml: line \d+: not valid YAML"):
        recipes.load(path)


def test_yaml_that_is_not_a_mapping(tmp_path):
    with pytest.raises(RecipeError, match="a recipe is a YAML mapping"):
        recipes.load(write(tmp_path, "list.yaml", "- a\n- b\n"))


# ---- ours (TOML) -------------------------------------------------------------------------------------------------
OURS = """\
name = "t"
model = "/m"
needs = ["model:{model}"]
command = ["vllm", "serve", "{model}", "--max-model-len", "{max_model_len}", "--enforce-eager",
           "--compilation-config", "{{\\"level\\": 0}}"]
workarounds = [{ flag = "--enforce-eager", because = "cutedsl-450-libs-base-mma" }]
[defaults]
max_model_len = 1024
[env]
CACHE = "/tmp/{max_model_len}"
"""


def test_ours_templating_literal_braces_env_and_workarounds(tmp_path):
    r = recipes.load(write(tmp_path, "t.toml", OURS))
    assert r.format == "sparkdoctor"
    assert r.argv == ["vllm", "serve", "/m", "--max-model-len", "1024", "--enforce-eager", "--compilation-config", '{"level": 0}']
    assert r.env == {"CACHE": "/tmp/1024"}
    assert r.workarounds == [{"flag": "--enforce-eager", "because": "cutedsl-450-libs-base-mma"}]
    assert r.warnings == [] and r.served_model_name == "/m" and r.readiness_path == "/health"
    assert r.needs == ["model:/m"]
    assert recipes.load(write(tmp_path, "t.toml", OURS), {"model": "/other"}).needs == ["model:/other"]


@pytest.mark.parametrize("text, message", [
    ("name = 'x'\ncommand = [\n", r"x.toml: not valid TOML"),
    ("name = 'x'\n", r"x.toml: required field 'command' is missing"),
    ("command = 'vllm serve m'\n", r"x.toml: field 'command' must be a non-empty list"),
    ("command = ['vllm']\ncomand = 1\n", r"x.toml: unknown field\(s\): comand"),
    ("command = ['vllm', '{model}']\n", r"x.toml: field 'command'\[1\]: missing parameter \{model\}"),
    ("command = ['vllm']\nport = 'eighty'\n", r"x.toml: field 'port' must be a port number"),
    ("command = ['vllm']\nworkarounds = [{flag = '--enforce-eager'}]\n", r"x.toml: workarounds\[0\]: field 'because'"),
    ("command = ['vllm']\nworkarounds = [{flag = '-x', env = 'Y', because = 'a-b'}]\n", r"exactly one of 'flag' or 'env'"),
    ("command = ['vllm']\nschema = 2\n", r"x.toml: field 'schema' is 2"),
])
def test_ours_bad_input_names_file_and_field(tmp_path, text, message):
    with pytest.raises(RecipeError, match=message):
        recipes.load(write(tmp_path, "x.toml", text))


def test_ours_workaround_missing_from_command_is_a_warning(tmp_path):
    r = recipes.load(write(tmp_path, "w.toml", "command = ['vllm', 'serve', 'm']\n"
                                               "workarounds = [{flag = '--enforce-eager', because = 'cutedsl-450-libs-base-mma'}]\n"))
    assert any("--enforce-eager" in w and "not in the resolved command" in w for w in r.warnings)


# ---- shipped recipes ---------------------------------------------------------------------------------------------
def test_every_shipped_recipe_loads_cleanly_and_its_reasons_are_matrix_entries():
    ids = {e.id for e in load_matrix().entries}
    shipped = recipes.shipped()
    assert {p.stem for p in shipped} >= {"qwen36-nvfp4-w4a4", "qwen36-fp8", "nemotron-nano-w4a16", "tiny-cpu"}
    for path in shipped:
        r = recipes.load(path.stem)
        assert r.warnings == [], (path, r.warnings)
        assert r.argv[:2] == ["vllm", "serve"]
        assert any(n.startswith("model:") for n in r.needs)
        for w in r.workarounds:
            assert w["because"] in ids, (path, w)
        if path.stem != "tiny-cpu":
            assert "gb10" in r.needs


def test_the_daily_has_no_enforce_eager_and_the_old_one_says_why():
    daily = recipes.load("qwen36-nvfp4-w4a4")
    assert "--enforce-eager" not in daily.argv and "flashinfer_cutlass" in daily.argv
    old = recipes.load("qwen36-nvfp4-w4a4-eager")
    assert {"flag": "--enforce-eager", "because": "cutedsl-450-libs-base-mma"} in old.workarounds
    assert old.fingerprint() != daily.fingerprint()


def test_unknown_name_lists_the_shipped_recipes():
    with pytest.raises(RecipeError, match=r"no-such-recipe: no such recipe file.*shipped: .*tiny-cpu"):
        recipes.load("no-such-recipe")


# ---- the command -------------------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=60, cwd=REPO)


def test_recipe_show_json_is_versioned_and_alone_on_stdout():
    done = _cli("recipe", "show", str(DATA / "nemotron-3-super-nvfp4.yaml"), "--set", "port=9100", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == 1 and doc["recipe"]["port"] == 9100 and doc["recipe"]["sources"]["param:port"] == "--set"
    assert "appears twice" in done.stderr  # warnings go to stderr, never into the JSON stream


def test_recipe_show_console_and_errors_are_one_line():
    done = _cli("recipe", "show", "tiny-cpu", "--set", "model=/models/tiny")
    assert done.returncode == 0, done.stderr
    assert "vllm serve /models/tiny" in done.stdout and "--set" in done.stdout
    bad = _cli("recipe", "show", "tiny-cpu", "--set", "novalue")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "key=value" in bad.stderr
    missing = _cli("recipe", "show", str(DATA / "nope.yaml"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no such recipe file" in missing.stderr


def test_recipe_show_on_a_pipe_keeps_every_field_name_whole():
    """On a pipe (80 columns) the field column was cut: `env VLLM_ENABLE_V1_MULTIPROCE…`, and `param
    kv_cache_memory_bytes` broke over two lines, so `recipe show R | grep VLLM_ENABLE_V1_MULTIPROCESSING` found nothing.
    On a pipe recipe show is drawn 160 columns wide, as recipe check is: a row is one line."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "show", "tiny-cpu", "--set", "model=./models/tiny"],
                          capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr
    for name in ("env VLLM_ENABLE_V1_MULTIPROCESSING", "param kv_cache_memory_bytes", "env VLLM_USE_AOT_COMPILE"):
        assert any(line.startswith(name) for line in done.stdout.splitlines()), done.stdout
    assert "\u2026" not in done.stdout
    assert "launcher: 127.0.0.1, a free port" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines() if not line.startswith("  vllm serve")) <= 160


def test_a_stored_recipe_comes_back_equal_and_a_tampered_one_is_refused():
    r = recipes.load(DATA / "deepseek-v4-flash.yaml")
    doc = json.loads(json.dumps(r.to_dict()))
    back = recipes.recipe_from_dict(doc)
    assert back == r and back.fingerprint() == r.fingerprint()
    doc["argv"] = doc["argv"] + ["--enforce-eager"]
    with pytest.raises(RecipeError, match="does not match its contents"):
        recipes.recipe_from_dict(doc)
    with pytest.raises(RecipeError, match="stored recipe"):
        recipes.recipe_from_dict({"name": "x"})


def test_sparkrun_defaults_that_expand_without_end_are_an_error_not_a_memory_blowup(tmp_path):
    path = write(tmp_path, "bomb.yaml", "model: m\ndefaults: {a: '{b}{b}{b}{b}', b: '{a}{a}{a}{a}'}\n"
                                        "command: vllm serve {model} {a}\n")
    with pytest.raises(RecipeError, match=r"bomb.yaml: defaults.\w: placeholders expand past 65536 characters"):
        recipes.load(path)


def test_eugr_format_spec_of_a_huge_width_is_refused(tmp_path):
    path = write(tmp_path, "wide.yaml", 'recipe_version: "1"\nname: x\ncontainer: c\ndefaults: {port: 1}\n'
                                       "command: vllm serve m --port {port:>2000000000}\n")
    with pytest.raises(RecipeError, match=r"wide.yaml: field 'command': format spec '>2000000000'"):
        recipes.load(path)


@pytest.mark.parametrize("name, text", [
    # a width given by a nested field (`{port:{w}}`, str.format resolves it first): 100 MB from one placeholder
    ("nested.yaml", 'recipe_version: "1"\nname: x\ncontainer: c\ndefaults: {port: 1, w: 99999999}\n'
                    "command: vllm serve m --port {port:{w}}{port:{w}}{port:{w}}\n"),
    # widths under the limit, many of them: a 160 KB recipe was 200 MB of command (120 s, 1.4 GB, then the time limit)
    ("many.yaml", 'recipe_version: "1"\nname: x\ncontainer: c\ndefaults: {a: x}\ncommand: "vllm serve m '
                  + "{a:9999}" * 20_000 + '"\n'),
    # the same spread over argv elements and env values of sparkdoctor's format, each formatted on its own
    ("many.toml", 'model = "m"\ncommand = ["vllm", "serve", ' + ", ".join(['"{model:9999}"'] * 20_000) + "]\n"),
    ("env.toml", 'model = "m"\ncommand = ["vllm", "serve"]\n[env]\n' + "".join(f'E{i} = "{{model:9999}}"\n' for i in range(20_000))),
])
def test_templates_that_expand_past_a_mebibyte_are_refused_at_once(tmp_path, name, text):
    started = time.process_time()
    with pytest.raises(RecipeError, match=rf"^{tmp_path}/{name}: .*(the templates expand past 1 MiB|asks for a width of 10,000)"):
        recipes.load(write(tmp_path, name, text))
    assert time.process_time() - started < 10


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    lines = ["model: m", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]"
              for i in range(1, 20)]
    path = write(tmp_path, "laughs.yaml", "\n".join(lines) + "\n")
    with pytest.raises(RecipeError, match=r"laughs.yaml: line \d+: its aliases expand it to over 200,000 nodes"):
        recipes.load(path)
    few = write(tmp_path, "few.yaml", "model: m\nbase: &b {port: 8000}\ndefaults: *b\n")
    assert recipes.load(few).port == 8000


def test_recipe_show_lists_what_a_recipe_changes_inside_its_container():
    """eugr `mods:` (nemotron-3-nano-nvfp4.yaml) and sparkrun `patches:`/`variants:` (a real styles01 recipe)."""
    eugr = _cli("recipe", "show", str(DATA / "nemotron-3-nano-nvfp4.yaml"))
    assert eugr.returncode == 0, eugr.stderr
    assert "mods (applied inside the container" in eugr.stdout and "mods/nemotron-nano" in eugr.stdout
    sparkrun = _cli("recipe", "show", str(DATA / "styles01-qwen-35b.yaml"))
    assert sparkrun.returncode == 0, sparkrun.stderr
    out = " ".join(sparkrun.stdout.split())
    assert "patches (applied inside the container" in out and "patch_mamba_drop_eagle.sh" in out
    assert "recipe_concurrent: Concurrent stack" in out and "max_num_seqs=8" in out


def test_the_recipes_readme_example_reads_without_a_warning(tmp_path):
    """The TOML example in recipes/README.md, copied as a new user copies it, warned that its own `CUTE_DSL_ARCH`
    workaround was not in its `[env]`."""
    text = (REPO / "recipes" / "README.md").read_text()
    example = text.split("```toml\n", 1)[1].split("```", 1)[0]
    r = recipes.load(write(tmp_path, "readme.toml", example))
    assert r.warnings == [] and r.env["CUTE_DSL_ARCH"] == "sm_121a", r.warnings
