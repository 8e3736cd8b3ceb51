"""`fix --yes` and `fix --rollback` ran the target's pip WITH site for the install and uninstall themselves
(a runner of its own, fix/target_pip.py): a `.pth` import line and the sitecustomize.py of the target ran once per `--yes` and twice per
`--rollback`. Every pip call of fix's now runs the target's interpreter without site, the import path rebuilt from files
(targets/target_pip_dry.py). A venv made as users make it (`python -m venv`, its own pip), local wheels, no network.

A uv venv (no pip) was installed into by `uv pip install/uninstall --python PY`, and uv starts PY with site to ask
about it: the same lines ran on `--yes` and `--rollback` whenever uv's cache held no answer about PY. It is now
installed into by sparkdoctor's own pip, run by PY without site like every other call."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.fix import scenario
from tests.fix.scenario import fix_cli

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["pip", "uv"])
def test_apply_and_rollback_run_no_pth_import_line_or_sitecustomize_of_the_target(tmp_path, wheels, kind):
    python = scenario.make_target(tmp_path, kind, wheels)
    site = next(Path(python).parent.parent.glob("lib/python*/site-packages"))
    markers = tmp_path / "markers"
    markers.mkdir()
    (site / "zz_evil.pth").write_text(f"import os; open(os.path.join({str(markers)!r}, 'PTH_%d' % os.getpid()), 'w').write(repr(__import__('sys').argv))\n")
    (site / "sitecustomize.py").write_text(f"import os\nopen(os.path.join({str(markers)!r}, 'SC_%d' % os.getpid()), 'w').close()\n")
    # UV_CACHE_DIR: no answer about the interpreter kept from before, as on a user's machine after a `uv cache clean`
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1", "UV_OFFLINE": "1",
           "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(wheels), "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    applied = fix_cli(python, "--yes", env=env)
    assert applied.returncode == 0 and (site / "six-1.17.0.dist-info").is_dir(), applied.stdout + applied.stderr
    assert sorted(os.listdir(markers)) == [], "fix --yes ran the target's startup code"
    pyc = site / "__pycache__" / "six.cpython-{}{}.pyc".format(*sys.version_info[:2])
    size = int.from_bytes(pyc.read_bytes()[12:16], "little")  # the source size the .pyc was compiled from
    assert size == (site / "six.py").stat().st_size, "pip still byte-compiles what it installs (six 1.17.0's six.py)"
    back = fix_cli(None, "--rollback", env=env)
    assert back.returncode == 0 and (site / "six-1.16.0.dist-info").is_dir(), back.stdout + back.stderr
    assert sorted(os.listdir(markers)) == [], "fix --rollback ran the target's startup code"
