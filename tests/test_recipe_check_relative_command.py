"""`recipe check` judges the venv of the recipe's command (…/bin/vllm -> …/bin/python) and runs that interpreter's
probes. A command named by a relative path (`tools/bin/vllm`) resolved against the folder recipe check ran in,
often the recipe's own cloned repository: its `tools/bin/python`, a program of the recipe's choosing, ran. Now a
relative command path is not followed (bench, which runs the command itself, still follows it); the real CLI, a
canary interpreter beside the command."""

from __future__ import annotations

import os
import subprocess
import sys

from sparkdoctor.targets import early

RECIPE = """recipe_version: "2"
model: org/toy
runtime: vllm
command: tools/bin/vllm serve org/toy --port 8000 --enforce-eager
"""


def test_a_recipe_commands_relative_path_never_runs_its_interpreter(tmp_path):
    clone = tmp_path / "clone"
    (clone / "tools" / "bin").mkdir(parents=True)
    canary = tmp_path / "CANARY"
    python = clone / "tools" / "bin" / "python"
    python.write_text(f"#!/bin/sh\necho ran > {canary}\nexec {sys.executable} \"$@\"\n")
    (clone / "tools" / "bin" / "vllm").write_text("#!/bin/sh\nexit 0\n")
    for f in (python, clone / "tools" / "bin" / "vllm"):
        f.chmod(0o755)
    (clone / "toy.yaml").write_text(RECIPE)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", "toy.yaml", "--format", "json"],
                          cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert not canary.exists(), "recipe check ran the interpreter beside the recipe's relative command"
    assert done.returncode != 0 and "relative path tools/bin/vllm is not followed" in done.stderr + done.stdout, done


def test_a_relative_path_is_not_followed_for_bench_either_an_absolute_one_is(tmp_path, monkeypatch):
    """bench launches in a run folder of its own, where `bin/vllm` names nothing: following it only ran the recipe
    folder's `bin/python` as the target of bench's toolchain probe and mods gate."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    assert early.python_of_command(["bin/vllm"]) is None
    assert early.python_of_command([str(tmp_path / "bin" / "vllm")]) == tmp_path / "bin" / "python"
