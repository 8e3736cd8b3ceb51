"""The head start of `recipe check` (sparkdoctor/targets/early.py): its target probe, flags probe and GPU helper start
from the console entry point, with the recipe's env, and the ordinary path takes them only when their command line and
whole environment are the ones it would start; the document is the same with and without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.conclusions import recipe_check
from sparkdoctor.launch import read_recipe
from sparkdoctor.targets import early
from sparkdoctor.targets.local import resolve_python_target

REPO = Path(__file__).resolve().parent.parent
RECIPE = """recipe_version: "2"
model: org/toy
runtime: vllm
env:
  VLLM_USE_FLASHINFER_SAMPLER: "1"
command: vllm serve org/toy --port 8000 --enforce-eager
"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    yield
    early.drop()


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text(RECIPE)
    return path


def _ordinary(recipe_path: Path):
    """What recipe check's own path starts (conclusions/recipe_check._judge): the probes with the recipe's env."""
    from sparkdoctor.collect.targetenv import start_probes
    from sparkdoctor.recipes import load

    target = recipe_check.EnvTarget(resolve_python_target(sys.executable), load(recipe_path).env)
    prestarted = start_probes(target, no_cache=False)
    return prestarted, recipe_check.start_vllm_flags(target)


def _stop(prestarted, flags):
    from sparkdoctor.collect import gpu

    next(iter(prestarted.values())).running.cancel()
    flags.cancel()
    gpu.take_early("gpu"), gpu.take_early("health")


def test_the_early_children_are_the_ones_recipe_check_starts(recipe):
    early.start(["sparkdoctor", "recipe", "check", str(recipe), "--python", sys.executable, "-f", "json"], read_recipe)
    raw = {name: running for name, (running, _) in early.RAW.items()}
    assert set(raw) == {early.TARGET, early.FLAGS, early.GPU}
    assert early.RAW[early.TARGET][1]["VLLM_USE_FLASHINFER_SAMPLER"] == "1", "the probe sees the recipe's env"
    prestarted, flags = _ordinary(recipe)
    try:
        probe = next(iter(prestarted.values()))
        assert probe.running.inner.inner is raw[early.TARGET]
        assert flags.inner is raw[early.FLAGS]
        from sparkdoctor.collect import gpu

        assert gpu._early is raw[early.GPU]
        assert early.RAW == {}
    finally:
        _stop(prestarted, flags)


def test_a_recipe_whose_env_changed_after_the_early_read_is_probed_again(recipe):
    """The early probes ran with the env the recipe had then: another env means other probes, never theirs."""
    early.start(["sparkdoctor", "recipe", "check", str(recipe), "--python", sys.executable], read_recipe)
    raw = {name: running for name, (running, _) in early.RAW.items()}
    recipe.write_text(RECIPE.replace('"1"', '"0"'))
    prestarted, flags = _ordinary(recipe)
    try:
        assert next(iter(prestarted.values())).running.inner.inner is not raw[early.TARGET]
        assert flags.inner is not raw[early.FLAGS]
        for name in (early.TARGET, early.FLAGS):
            assert raw[name].popen is None or raw[name].popen.wait(timeout=30) is not None, "cancelled"
    finally:
        _stop(prestarted, flags)


@pytest.mark.parametrize("extra", [
    ["--set", "env.VLLM_X=1"],  # may change the env: read after parsing
    ["--container", "c1"],
    ["--image", "img"],
    ["--help"],
    ["--no-such-option"],
    ["second.yaml"],
    ["--python", "python3"],  # a name on PATH: resolved after parsing
    ["--python", "/no/such/python"],
])
def test_no_head_start_outside_the_plain_cases(recipe, extra):
    early.start(["sparkdoctor", "recipe", "check", str(recipe), *extra], read_recipe)
    assert early.RAW == {}


def test_a_large_file_is_left_to_the_ordinary_path(recipe):
    recipe.write_text(RECIPE + "#" * early.EARLY_RECIPE_BYTES + "\n")
    assert early.recipe_check_target(["sparkdoctor", "recipe", "check", str(recipe)], read_recipe) is None


def test_the_recipe_commands_venv_is_the_early_target(tmp_path, recipe):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (venv / "bin" / "vllm").write_text("#!/bin/sh\n")
    recipe.write_text(RECIPE.replace("command: vllm", f"command: {venv}/bin/vllm"))
    python, env = early.recipe_check_target(["sparkdoctor", "recipe", "check", str(recipe)], read_recipe)
    assert python == str(venv / "bin" / "python") and env == {"VLLM_USE_FLASHINFER_SAMPLER": "1"}


EVERY_KIND = """recipe_version: "1"
name: every-kind
model: nvidia/Qwen3-Next-80B-A3B-Instruct-NVFP4
container: vllm-node
mods: ["mods/fix-gone"]
env:
  VLLM_USE_FLASHINFER_MOE_FP4: "0"
  VLLM_TEST_FORCE_FP8_MARLIN: "1"
  VLLM_NVFP4_GEMM_BACKEND: marlin
  VLLM_NO_SUCH_SETTING: "1"
  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True
command: vllm serve nvidia/Qwen3-Next-80B-A3B-Instruct-NVFP4 --max-model-len 4096 --gpu-memory-utilization 0.90 \
--enforce-eager --disable-log-requests
"""


@pytest.mark.slow
def test_the_document_is_the_same_with_and_without_the_head_start(tmp_path, vllm032_venv):
    """Byte for byte, cold and warm, on a recipe with a finding of every kind, against a real vLLM 0.32.0 venv."""
    (tmp_path / "repo" / "recipes").mkdir(parents=True)
    path = tmp_path / "repo" / "recipes" / "every-kind.yaml"
    path.write_text(EVERY_KIND)
    args = ["recipe", "check", str(path), "--python", str(vllm032_venv / "bin" / "python"), "-f", "json"]
    head_start = [sys.executable, "-m", "sparkdoctor", *args]  # the console entry point (sparkdoctor.launch)
    without = [sys.executable, "-c", "from sparkdoctor.cli import main; main()", *args]  # the CLI alone
    out = {}
    for run in ("cold", "warm"):
        for name, argv in (("head start", head_start), ("without", without)):
            env = {**os.environ, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / f"cache-{name}"), "HF_HUB_CACHE": str(tmp_path / "hub")}
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
            assert done.returncode == 1, done.stderr
            out[run, name] = done.stdout
    assert len(set(out.values())) == 1, "byte for byte the same"
    kinds = {f["kind"] for f in json.loads(out["warm", "head start"])["findings"]}
    assert kinds == {"env", "flag", "workaround", "matrix", "setting", "mod"}


def test_a_recipe_without_mods_never_loads_the_mods_judge(recipe):
    """recipe check's start-up: sparkdoctor.mods (its judge, diffs and container trees) loads only for a recipe that
    names mods. Run as a user runs it, in a fresh interpreter, and read the modules it imported."""
    probe = ("import runpy, sys; sys.argv = ['sparkdoctor', 'recipe', 'check', sys.argv[1], '--python', sys.executable,"
             " '-f', 'json']\ntry:\n    runpy.run_module('sparkdoctor', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "sys.stderr.write('\\nLOADED ' + ' '.join(sorted(m for m in sys.modules if m.startswith('sparkdoctor.'))))")
    done = subprocess.run([sys.executable, "-c", probe, str(recipe)], capture_output=True, text=True, timeout=300)
    loaded = done.stderr.rpartition("LOADED ")[2].split()
    assert "sparkdoctor.conclusions.recipe_check" in loaded  # it really ran recipe check
    assert not [m for m in loaded if m.startswith("sparkdoctor.mods")]


def test_a_recipes_env_never_makes_the_probes_run_its_code(tmp_path):
    """A recipe is someone else's file: `env: {PYTHONPATH: DIR}` with a sitecustomize.py in DIR ran that code in
    the target's interpreter, unsandboxed, when `recipe check` (and its head start) started the probes. What loads
    code (PYTHON*, LD_*, BASH_ENV) is not passed to the probes; the recipe's other variables still are."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    planted, marker = tmp_path / "planted", tmp_path / "code-ran"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    path = tmp_path / "hostile.yaml"
    path.write_text(RECIPE.replace("env:\n", f"env:\n  PYTHONPATH: {planted}\n  PYTHONSTARTUP: {planted / 'sitecustomize.py'}\n"))
    assert early.recipe_check_target(["sparkdoctor", "recipe", "check", str(path), "--python", str(venv / "bin" / "python")],
                                     read_recipe)[1] == {"VLLM_USE_FLASHINFER_SAMPLER": "1"}
    console = Path(sys.executable).with_name("sparkdoctor")
    for argv in ([sys.executable, "-m", "sparkdoctor"], [str(console)] if console.exists() else []):
        if not argv:
            continue
        done = subprocess.run([*argv, "recipe", "check", str(path), "--python", str(venv / "bin" / "python"), "-f", "json"],
                              capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
        assert done.stdout.startswith("{"), done.stderr[-500:]
        assert not marker.exists(), f"the recipe's sitecustomize.py ran ({marker.read_text().count('x')} times)"
    assert recipe_check.EnvTarget(resolve_python_target(sys.executable), {"LD_PRELOAD": "x", "VLLM_X": "1"}).env == {"VLLM_X": "1"}


def test_a_recipes_home_never_makes_a_python_outside_a_venv_run_its_user_site(tmp_path):
    """`env: {HOME: DIR}` with DIR/.local/lib/pythonX.Y/site-packages/usercustomize.py: a Python outside a venv (the
    system's, conda's base, the one in eugr's images) runs it at start-up, so `recipe check` ran the recipe author's
    code in two probes. A relative HOME would even resolve inside a cloned recipe repo. HOME (and OPENSSL_*) from a
    recipe no longer reaches the probes; they keep the user's own."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    assert base.exists(), base
    home, marker = tmp_path / "home", tmp_path / "code-ran"
    site = home / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    (site / "usercustomize.py").write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    probe = subprocess.run([str(base), "-c", "import site; print(site.ENABLE_USER_SITE)"], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "HOME": str(home)})
    assert probe.stdout.strip() == "True" and marker.exists(), "the planted user site runs in this Python (the attack is real)"
    marker.unlink()
    path = tmp_path / "hostile.yaml"
    path.write_text(RECIPE.replace("env:\n", f"env:\n  HOME: {home}\n  OPENSSL_CONF: {home / 'openssl.cnf'}\n"))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", str(path), "--python", str(base), "-f", "json"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
    assert done.stdout.startswith("{"), done.stderr[-500:]
    assert not marker.exists(), f"the recipe's usercustomize.py ran ({marker.read_text().count('x')} times)"
    assert recipe_check.EnvTarget(resolve_python_target(sys.executable), {"HOME": "h", "OPENSSL_CONF": "c", "VLLM_X": "1"}).env == {"VLLM_X": "1"}


def test_a_ptxas_only_the_recipes_env_names_is_listed_never_run(tmp_path):
    """`CUDA_HOME`, `TRITON_PTXAS_PATH` or a `PATH` folder of the recipe's own naming a "ptxas" made `recipe check` run
    that program (to read its version) outside any sandbox. It is listed, with why it was not run; the same program
    named by the user's own environment is still run and judged."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    fake, marker = tmp_path / "cuda" / "bin" / "ptxas", tmp_path / "ptxas-ran"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!/bin/sh\necho x >> {marker}\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    fake.chmod(0o755)
    path = tmp_path / "hostile.yaml"
    path.write_text(RECIPE.replace("env:\n", f"env:\n  CUDA_HOME: {fake.parent.parent}\n  TRITON_PTXAS_PATH: {fake}\n"
                                             f"  PATH: {fake.parent}:/usr/bin:/bin\n"))
    argv = [sys.executable, "-m", "sparkdoctor", "recipe", "check", str(path), "--python", str(venv / "bin" / "python"), "-f", "json"]
    env = {**os.environ, "COLUMNS": "200", "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache1")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.stdout.startswith("{"), done.stderr[-500:]
    assert not marker.exists(), f"the recipe's ptxas ran ({marker.read_text().count('x')} times)"
    # the same file named by the user's own environment is theirs: run and judged as before
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                          env={**env, "CUDA_HOME": str(fake.parent.parent), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache2")})
    assert done.stdout.startswith("{") and marker.exists(), done.stderr[-500:]


def test_a_recipes_env_never_sets_sparkdoctors_own_variables_for_the_probes():
    """A recipe's `SPARKDOCTOR_PROBE_PYCACHE` named the folder the probes' Python reads compiled modules from (a
    container target's probes took it as is), `SPARKDOCTOR_EXEC` the token a container's stray probe is found and
    stopped by: sparkdoctor's variables are its own, never a recipe's to set."""
    env = {"SPARKDOCTOR_PROBE_PYCACHE": "/x", "SPARKDOCTOR_EXEC": "t", "sparkdoctor_host_root": "/h", "VLLM_X": "1"}
    assert recipe_check.EnvTarget(resolve_python_target(sys.executable), env).env == {"VLLM_X": "1"}
    assert early.loads_code("SPARKDOCTOR_CUTEDSL_NO_FORK") and not early.loads_code("VLLM_SPARKDOCTOR")
