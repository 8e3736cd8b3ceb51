"""pip's settings that install somewhere else than the target's environment: PIP_TARGET (or PIP_PREFIX, PIP_ROOT), or
`target = ...` in a pip config file. `fix --yes` installed six 1.17.0 into that folder, saw six 1.16.0 still in the
venv, undid the apply and said "nothing changed (... verified identical ...)", while the folder it had written stayed
(six 1.17.0 there, and 1.16.0 put there by the undo). It was then refused before anything ran (exit 6); now fix's pip
runs without it (and without every other setting that does not reach the index): the plan says it was set aside, and
the apply installs into the venv. A venv made as users make it, local wheels, no network."""

from __future__ import annotations

import pytest

from tests.fix import scenario
from tests.fix.scenario import fix_cli

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("how", ["PIP_TARGET", "pip.conf"])
def test_settings_that_install_elsewhere_are_set_aside_and_the_apply_lands_in_the_venv(tmp_path, wheels, how):
    python = scenario.make_target(tmp_path, "pip", wheels)
    elsewhere = tmp_path / "elsewhere"
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}
    if how == "PIP_TARGET":
        env["PIP_TARGET"] = str(elsewhere)
    else:
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[install]\ntarget = {elsewhere}\n")
        env["PIP_CONFIG_FILE"] = str(conf)
    res = fix_cli(python, "--yes", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    shown = f"PIP_TARGET={elsewhere}" if how == "PIP_TARGET" else f"[install] target = {elsewhere} (a pip config file)"
    assert f"{shown}: installs somewhere else than the target's environment" in res.stdout, res.stdout
    assert not elsewhere.exists(), sorted(p.name for p in elsewhere.iterdir())
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    assert (site / "six-1.17.0.dist-info").is_dir() and "Verdict after:" in res.stdout, res.stdout
