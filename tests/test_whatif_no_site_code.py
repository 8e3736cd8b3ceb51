"""whatif promises that no package's code runs. Its dry run ran pip as `python -m pip` in the target (or sparkdoctor's
pip through `pip --python`, which starts the target's interpreter the same way), with site: every `.pth` import line
and the sitecustomize.py of the target ran on each whatif. Now pip runs there without site, on the import path site
would have made (sparkdoctor/targets/target_pip_dry.py); the answer is the same. A venv with its own pip and one
without, a local find-links folder, no network."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import resolve_python_target
from sparkdoctor.whatif.resolve import resolve_upgrade
from tests.released_server import build_wheel


def _plant(venv: Path, canary: Path) -> None:
    purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    (Path(purelib) / "aaa_canary.pth").write_text(f"import os; open({str(canary) + '-pth'!r}, 'w').close()\n")
    (Path(purelib) / "sitecustomize.py").write_text(f"open({str(canary) + '-sitecustomize'!r}, 'w').close()\n")


@pytest.mark.parametrize("own_pip", [True, False, "uv"])
def test_whatifs_dry_run_runs_no_startup_code_of_the_target(tmp_path, monkeypatch, own_pip):
    """"uv": a venv made by `uv venv` (no pip) was resolved by `uv pip install --dry-run --python PY`, and uv asks the
    interpreter about itself with site (`python -I -c ...`): the .pth line and sitecustomize.py ran. It is now
    resolved by sparkdoctor's pip without site, as any venv without pip."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("0.1.0", "0.2.0"):
        build_wheel(wheels, "demo", v, {"demo/__init__.py": b""})
    venv = tmp_path / "venv"
    if own_pip == "uv":
        from tests.venvs import uv

        subprocess.run([uv(), "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=300)
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # uv's kept answer about the interpreter: none
        monkeypatch.setenv("UV_NO_INDEX", "1")
        monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    else:
        subprocess.run([sys.executable, "-m", "venv", *([] if own_pip else ["--without-pip"]), str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    canary = tmp_path / "CANARY"
    _plant(venv, canary)
    facts = Facts(packages={"demo": {"name": "demo", "version": "0.1.0"}})
    [change] = resolve_upgrade(resolve_python_target(python), python, ["demo==0.2.0"], facts)
    assert change.new == "0.2.0"
    assert not list(tmp_path.glob("CANARY*")), "the target's .pth import line or sitecustomize.py ran"


def test_whatif_probes_scratch_venv_runs_no_startup_code_of_the_target(tmp_path, monkeypatch):
    """`whatif --probe` made its throwaway venv with `uv venv --python TARGET`, and uv asks TARGET about itself with
    site: the target's .pth line and sitecustomize.py ran. The scratch venv is now made from the target's base
    interpreter (whose site-packages are not the target's). The CLI end to end, offline: the probe's install fails."""
    import json

    from typer.testing import CliRunner

    from sparkdoctor.cli import app

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "nvidia-cutlass-dsl", "9.9", {"cutlass/__init__.py": b""})
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    for key, value in {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": "/dev/null", "UV_OFFLINE": "1",
                       "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}.items():
        monkeypatch.setenv(key, value)
    canary = tmp_path / "CANARY"
    _plant(venv, canary)
    res = CliRunner().invoke(app, ["whatif", "nvidia-cutlass-dsl==9.9", "--python", str(venv / "bin" / "python"), "--probe",
                                   "--no-read", "--no-deps", "--format", "json"])
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    assert [c["name"] for c in doc["changes"]] == ["nvidia-cutlass-dsl"], doc
    assert "could not run" in doc["probe"]["after"]["error"], doc["probe"]
    assert not list(tmp_path.glob("CANARY*")), "the target's .pth import line or sitecustomize.py ran"


def test_a_pip_too_old_for_a_dry_run_is_replaced_by_sparkdoctors(tmp_path, monkeypatch):
    """A venv whose pip predates `install --dry-run --report` (pip < 22.2: Ubuntu 22.04's venvs have 22.0.2) was
    "cannot be resolved ...: no such option: --dry-run" (exit 2). It is resolved by sparkdoctor's pip, as a venv without
    pip is. The old pip stands in here as a `pip` package that answers as pip 22.0 does."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("0.1.0", "0.2.0"):
        build_wheel(wheels, "demo", v, {"demo/__init__.py": b""})
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (purelib / "pip").mkdir()
    (purelib / "pip" / "__init__.py").write_text("__version__ = '22.0.4'\n")
    (purelib / "pip" / "__main__.py").write_text("import sys\nsys.stderr.write('\\nUsage: pip install [options]\\n\\nno such option: --dry-run\\n')\n"
                                                 "sys.exit(2)\n")
    for key, value in {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": "/dev/null"}.items():
        monkeypatch.setenv(key, value)
    python = str(venv / "bin" / "python")
    facts = Facts(packages={"demo": {"name": "demo", "version": "0.1.0"}})
    [change] = resolve_upgrade(resolve_python_target(python), python, ["demo==0.2.0"], facts)
    assert (change.name, change.new) == ("demo", "0.2.0")
