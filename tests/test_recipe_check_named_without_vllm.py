"""`recipe check RECIPE --python ENV` where ENV has no vLLM: it judged the recipe by the matrix only and exited 0,
with `(vLLM not installed)` in its header, while the same environment found by default was exit 6 ("never a silent
pass"). A named target without vLLM is still judged (its findings shown), then says why it is no pass: exit 6. A
command that runs another engine needs no vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv

import pytest

from sparkdoctor.exitcodes import EXIT_NO_VLLM


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    root = tmp_path_factory.mktemp("bare") / "env"
    venv.create(root, with_pip=False)
    return root / "bin" / "python"


def cli(cwd, *args):
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=dict(os.environ, COLUMNS="200"))


def test_a_named_target_without_vllm_is_judged_but_no_pass(bare, tmp_path):
    p = cli(tmp_path, "tiny-cpu", "--python", bare)
    assert p.returncode == EXIT_NO_VLLM == 6, (p.returncode, p.stdout, p.stderr)
    assert "(vLLM not installed)" in p.stdout and "workaround-stale:" in p.stdout  # the matrix's judgement is shown
    said = " ".join(p.stdout.split())
    why = said[said.index("not a pass: "):]  # the last thing said (drawn 160 wide on a pipe, so maybe on two lines)
    assert f"no vLLM in {bare} (named by --python)" in why and why.endswith("of the environment that serves it"), why
    doc = json.loads(cli(tmp_path, "tiny-cpu", "--python", bare, "--format", "json").stdout)
    assert doc["vllm"] is None and doc["failed"] is False
    assert doc["no_vllm"].startswith("recipe check ") and f"no vLLM in {bare} (named by --python)" in doc["no_vllm"]


def test_a_finding_at_fail_on_is_still_exit_1(bare, tmp_path):
    p = cli(tmp_path, "tiny-cpu", "--python", bare, "--fail-on", "warn")
    assert p.returncode == 1 and "not a pass" not in p.stdout, (p.returncode, p.stdout, p.stderr)


def test_another_engines_command_needs_no_vllm(bare, tmp_path):
    recipe = tmp_path / "llama.toml"
    recipe.write_text('schema = 1\nname = "llama"\ncommand = ["llama-server", "-m", "model.gguf", "--port", "8080"]\n')
    p = cli(tmp_path, recipe, "--python", bare)
    assert p.returncode == 0 and "not a pass" not in p.stdout, (p.returncode, p.stdout, p.stderr)
    assert json.loads(cli(tmp_path, recipe, "--python", bare, "--format", "json").stdout)["no_vllm"] is None
