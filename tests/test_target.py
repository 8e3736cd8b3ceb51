"""Target interpreters: how --python is resolved, and how a dead interpreter is told from a slow script."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sparkdoctor.targets import local as target_mod
from sparkdoctor.targets.local import PythonTarget


def script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(body)
    return path


def test_a_slow_script_on_a_live_interpreter_stops_nothing(tmp_path):
    # The interpreter answers `-c pass`: a timed-out script is that script's problem alone.
    python = str(tmp_path / "python")
    Path(python).symlink_to(sys.executable)
    t = PythonTarget(python, "test")
    slow = script(tmp_path, "slow.py", "import time; time.sleep(30)\n")
    other = t.start_script(script(tmp_path, "other.py", "import time; time.sleep(1.5); print('done')\n"), [])
    assert t.run_script(slow, [], timeout=0.5).timed_out
    assert other.result(10).stdout == "done\n"
    assert t.run_script(script(tmp_path, "later.py", "print('later')\n"), [], timeout=10).stdout == "later\n"


def test_a_dead_interpreter_stops_its_other_scripts_and_starts_none(tmp_path, monkeypatch):
    monkeypatch.setattr(target_mod, "PING_TIMEOUT", 0.5)
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexec sleep 60\n")  # hangs before running any Python
    python.chmod(0o755)
    t = PythonTarget(str(python), "test")
    long = t.start_script(tmp_path / "long.py", [])
    started = time.monotonic()
    first = t.run_script(tmp_path / "first.py", [], timeout=0.5)
    assert first.timed_out
    stopped = long.result(60)  # its own limit is a minute; the dead interpreter ends it now
    assert time.monotonic() - started < 5
    assert "was stopped: the interpreter does not answer" in stopped.describe_failure()
    late = t.run_script(tmp_path / "late.py", [], timeout=60)
    assert late.start_error and "does not answer" in late.describe_failure()


def test_a_venv_whose_base_python_is_gone_says_so(tmp_path):
    """The classic broken venv after a Python upgrade: bin/python is a link to nothing. It used to be "no such
    interpreter" for the link (which `ls` shows) and "a folder without bin/python" for the folder."""
    import pytest

    from sparkdoctor.targets import TargetError

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to("/nonexistent/python3.11")
    for given in (venv / "bin" / "python", venv):
        with pytest.raises(TargetError) as info:
            target_mod.resolve_python_target(str(given))
        message = str(info.value)
        assert "is a link to /nonexistent/python3.11, which does not exist" in message and "\n" not in message, message
    with pytest.raises(TargetError, match="no such interpreter"):  # a plain typo keeps its message
        target_mod.resolve_python_target(str(tmp_path / "nope" / "python"))
