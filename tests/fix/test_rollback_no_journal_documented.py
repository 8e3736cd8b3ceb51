"""`fix --rollback` with no journal to roll back is one line and exit 2; README's table of exit codes said nothing of
`fix --rollback`, so a user could not tell usage (2) from a refusal (4) or a failed rollback (5)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_rollback_without_a_journal_exits_as_the_readme_says(tmp_path):
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "fix", "--rollback"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, SPARKDOCTOR_STATE_DIR=str(tmp_path / "state")), cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout)
    assert len(p.stderr.splitlines()) == 1 and "nothing to roll back" in p.stderr, p.stderr
    row = next((line for line in README.read_text().splitlines() if line.startswith("| `fix --rollback` |")), None)
    assert row is not None, "README's exit-code table has no row for fix --rollback"
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert "no journal to roll back" in cells[1 + p.returncode], cells
