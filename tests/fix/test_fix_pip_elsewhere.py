"""pip's settings that install somewhere else than the target's environment: PIP_TARGET (or PIP_PREFIX, PIP_ROOT), or
`target = ...` in a pip config file. `fix --yes` installed six 1.17.0 into that folder, saw six 1.16.0 still in the
venv, undid the apply and said "nothing changed (... verified identical ...)", while the folder it had written stayed
(six 1.17.0 there, and 1.16.0 put there by the undo). It is now refused before anything runs, in one line, exit 6.
A venv made as users make it, local wheels, no network."""

from __future__ import annotations

import pytest

from tests.fix import scenario
from tests.fix.scenario import fix_cli

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("how", ["PIP_TARGET", "pip.conf"])
def test_settings_that_install_elsewhere_are_refused_before_anything_changes(tmp_path, wheels, how):
    python = scenario.make_target(tmp_path, "pip", wheels)
    elsewhere = tmp_path / "elsewhere"
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}
    if how == "PIP_TARGET":
        env["PIP_TARGET"] = str(elsewhere)
    else:
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[install]\ntarget = {elsewhere}\n")
        env["PIP_CONFIG_FILE"] = str(conf)
    before = scenario.state(python, [])
    res = fix_cli(python, "--yes", env=env)
    assert res.returncode == 6, res.stdout + res.stderr
    assert "pip's settings install somewhere else than" in res.stderr and f"target='{elsewhere}'" in res.stderr, res.stderr
    assert not elsewhere.exists(), sorted(p.name for p in elsewhere.iterdir())
    assert scenario.diff(before, scenario.state(python, [])) == [] and scenario.journals(tmp_path / "state") == []
