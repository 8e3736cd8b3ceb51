"""`fix` on environments built the ways Spark users build them, each made for real here: a uv venv (no pip in it)
driven by a sparkdoctor installed where no uv is (`uv tool install`, `pipx`: uv is not beside its python, and not
on a `sudo` PATH)."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.fix import scenario

pytestmark = [pytest.mark.slow]


def elsewhere(tmp_path: Path) -> Path:
    """A python that runs this checkout's sparkdoctor with no uv beside it (as a `uv tool install` does): a venv
    without pip whose .pth names this checkout and the packages sparkdoctor needs."""
    venv = tmp_path / "tool"
    scenario.must([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "sparkdoctor.pth").write_text(f"{Path(__file__).parents[2]}\n{sysconfig.get_paths()['purelib']}\n")
    return venv / "bin" / "python"


def test_a_uv_venv_with_no_uv_on_path_changes_nothing_and_says_what_to_do(tmp_path, wheels):
    target = scenario.make_target(tmp_path, "uv", wheels)
    before = scenario.state(target, [])
    tool = elsewhere(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    argv = [str(tool), "-m", "sparkdoctor", "fix", "--python", str(target), "--no-kernels", "--matrix", str(scenario.DATA / "matrix"),
            "--fixes", str(scenario.DATA / "fixes")]
    for extra in ([], ["--yes"]):
        res = scenario.run([*argv, *extra], env=env)
        lines = [line for line in res.stderr.splitlines() if line.startswith("sparkdoctor: error:")]
        # before: exit 5 (an apply that failed and was rolled back) and "install pip in the target"
        assert res.returncode == 6, res.stdout + res.stderr
        assert len(lines) == 1 and "uv made this venv" in lines[0] and "put uv on PATH" in lines[0], res.stderr
        assert f"{target} -m ensurepip" in lines[0]
    assert scenario.diff(before, scenario.state(target, [])) == []
    assert not os.path.exists(tmp_path / "state" / "journals") or not os.listdir(tmp_path / "state" / "journals")
