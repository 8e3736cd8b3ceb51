"""`fix --timeout SECONDS`: how long one pip call of fix (the plan's dry run, the apply's, the rollback's) may run;
$SPARKDOCTOR_FIX_INSTALL_TIMEOUT, else 1,800 s, stays the default. A pip that hangs held a rollback for 30 minutes
whatever the user said. The pip here is a stand-in that sleeps as it is imported (no CPU spent), in a venv made
without pip; the journal is written by hand with one saved wheel, whose offline dry run is the rollback's first pip
call."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import ActionKind, StepKind
from sparkdoctor.fix.model import Plan, Step
from tests.fix.test_fix_journal_trust import error
from tests.fix.test_fix_targets import sd


def hanging_pip_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (purelib / "pip").mkdir()
    (purelib / "pip" / "__init__.py").write_text("import time\ntime.sleep(3600)\n")
    (purelib / "pip" / "__main__.py").write_text("")
    (purelib / "pip-99.0.dist-info").mkdir()
    (purelib / "pip-99.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: pip\nVersion: 99.0\n")
    (purelib / "pip-99.0.dist-info" / "RECORD").write_text("pip/__init__.py,,\npip/__main__.py,,\n")
    return venv / "bin" / "python"


def journal_with_a_wheel(python: Path) -> str:
    folder = jr.journals_dir() / "20261201-000010-c0ffee"
    (folder / "copies").mkdir(parents=True)
    (folder / "wheels").mkdir()
    wheel = folder / "wheels" / "demo-1.0-py3-none-any.whl"
    wheel.write_bytes(b"a wheel the stand-in pip never reads")  # and no copy of demo's file: only pip could restore it
    plan = Plan(target={"python": str(python)}, installer="pip",
                steps=[Step(op=StepKind.uninstall, fix="x", why=[], kind=ActionKind.uninstall, names=["demo"])]).to_dict()
    data = {"journal_version": 2, "id": folder.name, "created": "2026-11-23T00:00:00Z", "installer": "pip",
            "target": {"kind": "python", "python": str(python)}, "plan": plan,
            "packages_before": [{"name": "demo", "version": "1.0"}], "touched_before": {"demo": "1.0"},
            "hashes_before": {}, "files": [], "dist_files": {"demo": [{"path": f"{python.parent.parent}/lib/demo.py", "copy": "copies/dists/0"}]}, "wheels": {"demo": wheel.name},
            "wheel_files": {wheel.name: {"size": wheel.stat().st_size, "sha256": jr.sha256_file(wheel)}}, "outside": None}
    body = (json.dumps(data, indent=1) + "\n").encode()
    (folder / "journal.json").write_bytes(body)
    (folder / jr.COMPLETE).write_text(hashlib.sha256(body).hexdigest() + "\n")
    (folder / jr.APPLIED).write_text("{}\n")
    return folder.name


def test_a_hanging_pip_is_stopped_at_the_timeout_given(tmp_path):
    ident = journal_with_a_wheel(hanging_pip_venv(tmp_path))
    # the variable says 1,800 s; the option says 2 s, and wins: the rollback's first pip call is stopped, nothing changed
    res = sd("fix", "--rollback", ident, "--timeout", "2", env={"SPARKDOCTOR_FIX_INSTALL_TIMEOUT": "1800"})
    error(res, 4, "cannot restore this target", "timed out after 2.0s", "nothing was changed")
    assert jr.load(ident).status() == "applied"


def test_a_timeout_that_is_no_number_of_seconds_is_a_usage_error():
    for value in ("0", "-1", "nan", "inf"):
        error(sd("fix", "--timeout", value), 2, f"--timeout {float(value)}: give a number of seconds above 0")


def test_the_plans_and_the_applys_pip_calls_take_the_timeout_too(tmp_path):
    """The installer that the plan's dry run and the apply use (make_plan builds it with FixOptions.timeout) stops each
    of its pip calls at the timeout given."""
    import pytest

    from sparkdoctor.fix import installers, inventory
    from sparkdoctor.fix.interface import FixError
    from sparkdoctor.targets.local import resolve_python_target

    target = resolve_python_target(str(hanging_pip_venv(tmp_path)))
    installer = installers.for_target(target, inventory.read(target, before_changes=True), 2.0)
    for call in (lambda: installer.dry_run(["demo==1.0"]), lambda: installer.install(["demo==1.0"]),
                 lambda: installer.uninstall(["demo"])):
        with pytest.raises(FixError, match="timed out after 2.0s"):
            call()
