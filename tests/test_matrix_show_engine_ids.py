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


@pytest.mark.parametrize("finding", ["files-missing-triton", "requires-vllm-missing", "probe-nvfp4-mma"])
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
