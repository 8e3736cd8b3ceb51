"""SPARKDOCTOR_FIX_INSTALL_TIMEOUT (how long one pip call of fix may run) set to something that is no number of seconds
was read when fix was imported: `abc` made every fix mode, `--history` included, an internal error, and `nan` one in
the middle of the plan. It is read where a pip call needs it; a bad value is one line naming the variable."""

import os
import subprocess
import sys

import pytest

from sparkdoctor.errors import UsageError
from sparkdoctor.fix import installers


@pytest.mark.parametrize("value", ["abc", "nan", "-5", "0", "inf"])
def test_a_bad_install_timeout_is_one_line_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("SPARKDOCTOR_FIX_INSTALL_TIMEOUT", value)
    with pytest.raises(UsageError, match=f"SPARKDOCTOR_FIX_INSTALL_TIMEOUT={value}: give seconds"):
        installers.install_timeout()


def test_history_does_not_read_it(monkeypatch, tmp_path):
    env = {**os.environ, "SPARKDOCTOR_FIX_INSTALL_TIMEOUT": "abc", "SPARKDOCTOR_STATE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-B", "-m", "sparkdoctor", "fix", "--history"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0 and "No fix journals yet." in done.stdout, (done.returncode, done.stderr[-300:])
    monkeypatch.setenv("SPARKDOCTOR_FIX_INSTALL_TIMEOUT", "90")
    assert installers.install_timeout() == 90.0
    monkeypatch.delenv("SPARKDOCTOR_FIX_INSTALL_TIMEOUT")
    assert installers.install_timeout() == 1800.0
