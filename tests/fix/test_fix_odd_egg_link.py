"""A `.egg-link` that is a FIFO (or a device, or a folder) where fix's inventory looks for one: target_dists.py opened
it blocking, so with no writer the inventory waited out its 60 s limit (exit 3). pip itself opens every .egg-link in
site-packages, blocking, whenever it lists what is installed, so the plan's dry run would wait on it next. Now the
inventory opens it without blocking, finds it by stat, and fix stops in one line naming the file before pip runs
(exit 3, nothing changed). A real venv; the command's time and its children's CPU time are bounded."""

from __future__ import annotations

import os
import resource
import sys

import pytest

from tests.fix import scenario


@pytest.mark.slow
def test_a_fifo_egg_link_is_refused_in_one_line_not_waited_on(tmp_path, wheels, monkeypatch):
    venv = tmp_path / "venv"
    scenario.must([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "six.py").write_text("__version__ = '1.16.0'\n")
    (site / "six-1.16.0.egg-info").mkdir()  # setup.py develop's metadata: no direct_url.json, no RECORD
    (site / "six-1.16.0.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n")
    os.mkfifo(site / "six.egg-link")  # no writer, ever
    before = scenario.state(python, [])
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    spent = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = scenario.fix_cli(python, "--allow-replace", "six", "--yes", env=env, timeout=120)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in res.stderr.splitlines() if line.startswith("sparkdoctor: error:")]
    assert res.returncode == 3, res.stdout + res.stderr
    assert len(lines) == 1 and f"{site / 'six.egg-link'} is no regular file" in lines[0], res.stderr
    assert lines[0].endswith("remove it first; nothing was changed"), lines[0]
    assert "Traceback" not in res.stderr
    assert used.ru_utime + used.ru_stime - spent.ru_utime - spent.ru_stime < 60  # CPU, all children together
    assert scenario.diff(before, scenario.state(python, [])) == []
