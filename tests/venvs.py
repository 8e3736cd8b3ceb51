"""Real scratch virtual environments for tests: real pip, real packages from the registry.

Venvs are built once per (name, requirements) and reused across test sessions under
SPARKDOCTOR_TEST_VENVS (default ~/.cache/sparkdoctor-tests/venvs); pip's own cache makes a rebuild
cheap. Tests that modify files in a venv must use `fresh_venv` (a private copy), never a shared one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(os.environ.get("SPARKDOCTOR_TEST_VENVS", Path.home() / ".cache" / "sparkdoctor-tests" / "venvs"))
PIP_TIMEOUT = 900


def _pip(python: Path, args: list[str]) -> None:
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def create(venv: Path, requirements: list[str], pip_args: list[str] | None = None) -> Path:
    """Create venv with requirements installed; returns its python."""
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    if requirements:
        _pip(python_of(venv), ["install", *(pip_args or []), *requirements])
    return python_of(venv)


def shared_venv(name: str, requirements: list[str], pip_args: list[str] | None = None) -> Path:
    """A cached venv for read-only use; rebuilt when its requirements change."""
    key = hashlib.sha256(repr((requirements, pip_args, sys.version)).encode()).hexdigest()[:12]
    venv = ROOT / f"{name}-{key}"
    marker = venv / ".sparkdoctor-ready"
    if not marker.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        create(venv, requirements, pip_args)
        marker.write_text(" ".join(requirements))
    return python_of(venv)


def pip(python: Path, *args: str) -> None:
    """Run pip in the venv of `python` (for tests that change a fresh venv step by step)."""
    _pip(python, list(args))
