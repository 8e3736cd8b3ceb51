"""`matrix show ID` of an id check's own engine gives (probe-*, requires-*, files-missing-*) says what it is.

check printed `files-missing-triton`; `sparkdoctor matrix show files-missing-triton`, the way to read an entry in
full, answered "no matrix entry or stack with id 'files-missing-triton' (try `sparkdoctor matrix list`)", which does
not list it either.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ENGINE_IDS = ["files-missing-triton", "requires-vllm-missing", "probe-nvfp4-mma", "fix-unfinished", "no-serving-stack"]


@pytest.mark.parametrize("finding", ENGINE_IDS)
def test_an_engine_finding_id_is_named_as_one(finding):
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "show", finding], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"'{finding}' is a finding check makes itself, not a matrix entry" in done.stderr
    assert "docs/check.md" in done.stderr


def test_an_unknown_id_is_still_no_entry():
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "show", "nope"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert done.returncode == 2 and "no matrix entry or stack with id 'nope'" in done.stderr


def test_ignoring_an_engine_id_is_not_called_a_no_op():
    """`--ignore fix-unfinished` ignored the finding, and stderr said it "ignores nothing": no matrix entry has it."""
    from tests.test_cli import snap

    args = [a for i in ENGINE_IDS for a in ("--ignore", i)]
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", str(snap("nogpu-clean")), *args],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode in (0, 1) and "no matrix entry has this id" not in done.stderr, done.stderr
