"""A value option followed by another option of its command: click gave it that option as its value (`fix --rollback
--python --format json` made `--format` the interpreter and `json` the journal, and answered on the console; `fix -o
--yes` wrote a file named `--yes`). One line and exit 2 now, JSON when asked; `--opt=VALUE` still passes a value
that starts with "-"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def sd(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path),
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)


@pytest.mark.parametrize("args, word, following", [
    (["fix", "--rollback", "--python", "--format", "json"], "--python", "--format"),
    (["fix", "-o", "--yes"], "-o", "--yes"),
    (["matrix", "verify", "--matrix", "--format", "json"], "--matrix", "--format"),
    (["check", "--facts", "--no-kernels"], "--facts", "--no-kernels"),
])
def test_an_option_is_never_taken_as_an_options_value(tmp_path, args, word, following):
    done = sd(tmp_path, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(f"{word} needs a value, not the option {following} "
                                                         f"(a value that starts with '-': {word}{'=' if word.startswith('--') else ''}VALUE)")
    if "json" in args:
        assert json.loads(done.stdout)["errors"][0]["code"] == "usage"
    assert sorted(os.listdir(tmp_path)) == [p for p in sorted(os.listdir(tmp_path)) if not p.startswith("-")]


def test_a_value_that_starts_with_a_dash_still_passes_when_spelled_with_equals(tmp_path):
    done = sd(tmp_path, "check", "--python=-no-such-python", "--no-kernels")
    assert done.returncode == 3 and "-no-such-python" in done.stderr, done.stderr  # a target that is not there: 3
    facts = REPO / "tests" / "data" / "facts" / "gb10-broken.json"
    out = sd(tmp_path, "check", "--facts", str(facts), "--output=-odd.json", "--format", "json")
    assert out.returncode == 1 and json.loads((tmp_path / "-odd.json").read_text())["command"] == "check", out.stderr
