"""`sparkdoctor check` with no --python and no active venv judges the interpreter sparkdoctor runs in. Installed as
the README says (`pipx install ./`, `uv tool install ./`), that is sparkdoctor's own environment: the check said
"✓ no known problem matches this box ... PASS (exit 0)" about a venv that serves nothing, and only the header's
"chosen by current interpreter" hinted at it. It is said on stderr now when that interpreter holds none of the stack.
"""

from __future__ import annotations

import os
import subprocess
import sys

from sparkdoctor.check import own_environment
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget

NOTE = "the target is the interpreter sparkdoctor runs in"


def run_check(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--no-kernels", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path)


def test_a_check_of_sparkdoctorsown_environment_says_so_and_how_to_name_the_serving_one(tmp_path):
    done = run_check(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "chosen by current interpreter" in done.stdout
    [line] = [x for x in done.stderr.splitlines() if NOTE in x]
    assert line.startswith("sparkdoctor: warning: ") and sys.executable in line and "--python" in line


def test_a_target_named_with_python_gets_no_such_note(tmp_path):
    done = run_check(tmp_path, "--python", sys.executable)
    assert done.returncode == 0, done.stderr
    assert NOTE not in done.stderr


def test_the_current_interpreter_holding_part_of_the_stack_gets_no_such_note():
    target = PythonTarget(sys.executable, "current interpreter")
    empty = Facts.from_dict({"schema": 1, "packages": {"six": {"name": "six", "version": "1.17.0"}}})
    serving = Facts.from_dict({"schema": 1, "packages": {"triton": {"name": "triton", "version": "3.9.0"}}})
    assert len(own_environment(target, empty)) == 1
    assert own_environment(target, serving) == []
    assert own_environment(target, Facts.from_dict({"schema": 1, "packages": None})) == []  # unknown is not empty
    assert own_environment(PythonTarget(sys.executable, "VIRTUAL_ENV"), empty) == []


def test_a_fix_of_sparkdoctors_own_environment_says_so_too(tmp_path):
    """`sparkdoctor fix` from a pipx install plans for pipx's venv in the same way; it said nothing of it."""
    env = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")},
           "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fix", "--no-kernels"], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Nothing to fix" in done.stdout
    [line] = [x for x in done.stderr.splitlines() if NOTE in x]
    assert line.startswith("sparkdoctor: warning: ") and sys.executable in line
