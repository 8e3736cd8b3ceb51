"""A target's key (its lock and its "unfinished fix" mark) names the environment, not the interpreter's file name:
a mark written through v/bin/python was not seen by `check --python v/bin/python3`, and two fixes started through
the two names took two locks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sparkdoctor import unsettled


def test_every_name_of_one_venvs_interpreter_is_one_target(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    venvs = []
    for name in ("a", "b"):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / name)], check=True, timeout=120)
        venvs.append(tmp_path / name)
    a, b = venvs
    minor = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    names = [a / "bin" / n for n in ("python", "python3", minor)]
    assert {unsettled.local_key(str(p)) for p in names} == {os.path.realpath(a)}
    assert unsettled.local_key(str(b / "bin" / "python")) != unsettled.local_key(str(a / "bin" / "python"))
    unsettled.mark(unsettled.local_key(str(names[0])), "a", "J1", "apply")
    for other in names:
        found = unsettled.for_target({"kind": "local", "python": str(other)})
        assert found is not None and found["journal"] == "J1", other
    assert unsettled.for_target({"kind": "local", "python": str(b / "bin" / "python3")}) is None


def test_a_mark_under_the_key_of_before_is_still_seen(tmp_path, monkeypatch):
    """A mark left by a fix that ran before keys named the environment (a SIGKILL in its apply) must still stop the
    clean bill of health."""
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    python = tmp_path / "v" / "bin" / "python3"
    unsettled.mark(os.path.join(os.path.realpath(python.parent), "python3"), "v", "J0", "apply")
    found = unsettled.for_target({"kind": "local", "python": str(python)})
    assert found is not None and found["journal"] == "J0"


def test_a_key_that_is_not_utf8_names_a_mark(tmp_path, monkeypatch):
    """A venv moved to a folder whose name is not UTF-8 (`vbad\\xff`): its key could not be hashed (UnicodeEncodeError,
    an internal error in `fix`)."""
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    key = os.fsdecode(bytes(tmp_path) + b"/vbad\xff")
    unsettled.mark(key, "v", "J2", "apply")
    assert (unsettled.read(key) or {}).get("journal") == "J2"
    assert Path(unsettled._folder()).is_dir()
