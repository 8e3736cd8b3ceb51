"""The wheel carries the knowledge folders and works away from the checkout (pipx/uv tool style)."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import venvs

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_installed_wheel_finds_its_matrix_and_probes(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(wheels)],
                   check=True, timeout=300, capture_output=True)
    wheel = next(wheels.glob("sparkdoctor-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for folder in ("matrix", "probes", "fixes"):
        assert any(n.startswith(f"sparkdoctor/_data/{folder}/") for n in names), folder
    for probe in ("target_env", "cutedsl", "capabilities"):
        assert f"sparkdoctor/_data/probes/{probe}/__main__.py" in names
    assert "sparkdoctor/_data/probes/shared/probe_io.py" in names

    python = venvs.create(tmp_path / "venv", [str(wheel)])
    doctor = python.parent / "sparkdoctor"
    away = tmp_path / "elsewhere"  # not the checkout: only the wheel's copy can be found
    away.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    validate = subprocess.run([str(doctor), "matrix", "validate"], cwd=away, env=env, capture_output=True, text=True, timeout=60)
    assert validate.returncode == 0 and validate.stdout.startswith("ok: "), validate.stderr
    done = subprocess.run([str(doctor), "check", "--no-kernels", "--format", "json"], cwd=away, env=env,
                          capture_output=True, text=True, timeout=120)
    doc = json.loads(done.stdout)
    assert done.returncode == doc["exit_code"] in (0, 1)
    assert doc["facts"]["target"]["python"] == str(python) and "sparkdoctor" in doc["facts"]["packages"]
