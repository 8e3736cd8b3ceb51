"""`sparkdoctor report` as a user runs it: a subprocess with its own state and cache folders under tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_report(tmp_path: Path, *args: object) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "report", *map(str, args)], check=False, cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
