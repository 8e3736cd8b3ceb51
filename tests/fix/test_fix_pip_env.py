"""Settings of the user's environment that change what pip does, during `fix --yes` and `fix --rollback`, on a venv made
the ordinary way (python -m venv, its pip, plain pip install; local wheels, no network).

Before: a pip.conf in the venv with `requirement = FILE` had the apply install a package its plan never named (and say
"pass"), and `dry-run = true` (or PIP_DRY_RUN=1) had it change nothing, journal it as applied and fail its re-check
(exit 5). A rollback put nothing back (exit 5, "DIFFERENCES") with PYTHONPATH naming a folder that holds another pip
(that pip ran), with PIP_PYTHON set (pip ran itself again under another interpreter), or with PYTHONWARNINGS=error (pip
stopped on a DeprecationWarning of its own). fix's pip runs are now immune to each (installers.NEUTRAL_ENV, and the
environment's own pip imported past PYTHONPATH by target_pip_dry.py)."""

from __future__ import annotations

import pytest

from tests.fix import scenario
from tests.fix.scenario import fix_cli

pytestmark = pytest.mark.slow


def test_pip_settings_change_neither_the_apply_nor_the_rollback(tmp_path, wheels):
    python = scenario.make_target(tmp_path, "pip", wheels)
    venv = python.parent.parent
    site = next(venv.glob("lib/python*/site-packages"))
    (tmp_path / "extra.txt").write_text("decorator==5.1.1\n")
    (venv / "pip.conf").write_text(f"[install]\nrequirement = {tmp_path / 'extra.txt'}\ndry-run = true\n")
    other_pip = tmp_path / "pythonpath" / "pip"
    other_pip.mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (other_pip / name).write_text("raise SystemExit('another pip ran')\n")
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}
    before = scenario.state(python, [])

    applied = fix_cli(python, "--yes", env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    dists = sorted(p.name for p in site.glob("*.dist-info"))
    assert "six-1.17.0.dist-info" in dists and not [d for d in dists if d.startswith("decorator")], dists

    (venv / "pip.conf").unlink()  # not in the state compared: the rollback must put back what the apply changed
    hostile = {**env, "PYTHONPATH": str(other_pip.parent), "PIP_PYTHON": "/usr/bin/python3", "PYTHONWARNINGS": "error"}
    rolled = fix_cli(None, "--rollback", env=hostile)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert "Verified:" in rolled.stdout and "another pip ran" not in rolled.stdout + rolled.stderr
    assert scenario.diff(before, scenario.state(python, [])) == []
