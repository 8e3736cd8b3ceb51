"""`matrix validate`'s summary at an 80-column terminal: it was one line of about 170 columns that the terminal broke
anywhere; it is now a part a line (entries, evidence, report delay, matrix), and on a pipe the one line of before."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.pty_terminal import at_terminal

ARGV = [sys.executable, "-m", "sparkdoctor", "matrix", "validate"]


def test_the_summary_fits_an_80_column_terminal_a_part_a_line():
    seen = at_terminal(ARGV, 80, dict(os.environ))
    lines = [line for line in seen.lines if line.strip()]
    assert seen.code == 0 and max(len(line) for line in lines) <= 80, seen.text
    assert lines[0].startswith("ok: ") and any(line.startswith("evidence: ") for line in lines), seen.text


def test_on_a_pipe_the_summary_is_still_one_line():
    p = subprocess.run(ARGV, capture_output=True, text=True, timeout=60, env=dict(os.environ, COLUMNS="80"))
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 1, p.stdout
    assert p.stdout.startswith("ok: ") and " · evidence: " in p.stdout
