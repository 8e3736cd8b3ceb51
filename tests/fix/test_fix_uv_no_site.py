"""fix's plan for a venv made by uv (no pip in it) resolved with `uv pip install --dry-run --python PY`, and uv starts
PY with site to ask it about itself: the target's `.pth` import lines and its sitecustomize.py ran while a plan, which
changes nothing and runs nothing, was made. The plan's dry run is now sparkdoctor's own pip, run by the target's
interpreter without site (targets/target_pip_dry.py, as whatif resolves a venv without pip). A uv venv made as uv's
users make it, a local find-links folder, no network."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from sparkdoctor.fix import installers, inventory
from sparkdoctor.targets.local import resolve_python_target
from tests.released_server import build_wheel
from tests.venvs import uv


def test_a_plans_dry_run_in_a_uv_venv_runs_no_startup_code_of_the_target(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("0.1.0", "0.2.0"):
        build_wheel(wheels, "demo", v, {"demo/__init__.py": b""})
    venv = tmp_path / "venv"
    subprocess.run([uv(), "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # uv's kept answer about the interpreter: none
    for name, value in {"UV_NO_INDEX": "1", "UV_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1",
                        "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": "/dev/null"}.items():
        monkeypatch.setenv(name, value)
    subprocess.run([uv(), "pip", "install", "-q", "--python", str(python), "demo==0.1.0"], check=True, timeout=300)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    canary = tmp_path / "CANARY"
    (purelib / "aaa_canary.pth").write_text(f"import os; open({str(canary) + '-pth'!r} + str(os.getpid()), 'w').close()\n")
    (purelib / "sitecustomize.py").write_text(f"open({str(canary) + '-sitecustomize'!r}, 'w').close()\n")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache-2"))  # uv must ask the interpreter again

    target = resolve_python_target(str(python))
    inv = inventory.read(target, before_changes=True)
    assert not inv.has_pip
    res = installers.for_target(target, inv).dry_run(["demo==0.2.0"])
    assert res.installs == {"demo": "0.2.0"}
    assert not list(tmp_path.glob("CANARY*")), "the target's .pth import line or sitecustomize.py ran"
