"""`fix --container` against a real container of the session's dockerd whose environment carries pip settings that
change where or what pip installs, and the container's lock whichever way its interpreter is named. A venv made as
users make them (python -m venv, its pip, plain pip install) mounted read-write at another path (/opt/venv), local
file indexes and wheels mounted read-only, no network.

Before: the container's pip settings were set aside at unit level only (the same installer run by a local
interpreter), never through `docker exec`; and `fix --yes --container-python python` (found on the container's PATH)
took its early lock keyed by `python`, while the apply and a rollback key it by the interpreter the probe reports
(/opt/venv/bin/python): two lock files, so a second fix met a running rollback only after its whole check and plan."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import zipfile
from pathlib import Path

import pytest

from sparkdoctor import proc
from tests.container.test_container_cli import sd
from tests.fix import scenario
from tests.fix.test_fix_pip_settings import FIX, MATRIX, _indexes

pytestmark = pytest.mark.slow
INSIDE = "/opt/venv"


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_containers_pip_settings_are_set_aside_and_its_lock_is_one_whichever_interpreter_is_named(
        docker_daemon, docker_env, skeleton, tmp_path):
    wheels = scenario.wheelhouse(Path(os.environ.get("SPARKDOCTOR_TEST_VENVS", tmp_path / "venvs")) / "fix-wheelhouse")
    venv = scenario.make_target(tmp_path, "pip", wheels).parent.parent
    index, second = _indexes(tmp_path / "indexes")
    (venv / "pip.conf").write_text("[install]\npre = true\n")  # the venv's own pip config file, read inside
    data = tmp_path / "data"
    (data / "matrix").mkdir(parents=True)
    (data / "fixes").mkdir()
    (data / "matrix" / "small.toml").write_text(MATRIX)
    (data / "fixes" / "six-and-decorator.toml").write_text(FIX)

    name = "sd-fix-settings"
    args = ["run", "-d", "--init", "--network", "none", "--name", name]
    for src, dst in [*docker_daemon.host_mounts(), (str(wheels), str(wheels)), (str(tmp_path / "indexes"), str(tmp_path / "indexes"))]:
        args += ["-v", f"{src}:{dst}:ro"]
    args += ["-v", f"{venv}:{INSIDE}:rw", "-e", f"PATH={INSIDE}/bin:/usr/local/bin:/usr/bin:/bin"]
    for kv in (f"PIP_INDEX_URL={index}", f"PIP_FIND_LINKS={wheels}", f"PIP_EXTRA_INDEX_URL={second}", "PIP_USER=1", "PIP_NO_DEPS=1"):
        args += ["-e", kv]
    docker_daemon.containers.append(name)
    docker_daemon.must(*args, skeleton, "sleep", "infinity")
    env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"),
           "COLUMNS": "80"}
    target = ["--container", name, "--container-python", "python", "--no-kernels", "--matrix", str(data / "matrix"),
              "--fixes", str(data / "fixes")]

    planned = sd("fix", *target, "--format", "json", env=env, cwd=tmp_path, timeout=900)
    assert planned.returncode == 1, planned.stdout[-2000:] + planned.stderr[-3000:]
    plan = json.loads(planned.stdout)["plan"]
    assert plan["changes"] == {"six": ["1.16.0", "1.17.0"], "decorator": [None, "5.1.1"]}, plan["changes"]
    (note,) = [n for n in plan["notes"] if n.startswith("fix's pip runs without these pip settings")]
    for shown in (f"PIP_EXTRA_INDEX_URL={second}", "PIP_USER=1", "PIP_NO_DEPS=1", "[install] pre = true (a pip config file)"):
        assert shown in note, note
    assert "PIP_INDEX_URL" not in note and "PIP_FIND_LINKS" not in note, note

    applied = sd("fix", *target, "--yes", env=env, cwd=tmp_path, timeout=1800)
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    assert f"Note: {note}\n" in applied.stdout, applied.stdout
    assert f"Target: container {name}: {INSIDE}/bin/python" in applied.stdout, applied.stdout
    site = next(venv.glob("lib/python*/site-packages"))
    with zipfile.ZipFile(next(wheels.glob("six-1.17.0-*.whl"))) as zf:
        assert (site / "six.py").read_bytes() == zf.read("six.py")  # the wheel folder's, not the extra index's
    assert (site / "decorator.py").is_file()
    user_site = docker_daemon.must("exec", name, "sh", "-c", "test -e /root/.local && echo there || echo none")
    assert user_site == "none"  # nothing in the user site (PIP_USER)

    # a rollback holds the container's lock (keyed by the journal's /opt/venv/bin/python); a fix naming the
    # interpreter `python` is refused at once, before its check
    argv = [sys.executable, "-m", "sparkdoctor", "fix", "--rollback"]
    back = proc.start(argv, env={**env, "SPARKDOCTOR_FIX_STOP_AT": "rollback:start"}, cwd=str(tmp_path))
    assert back.popen is not None
    try:
        for _ in range(6000):  # polled every 0.1 s, at most 10 min on a loaded machine
            if back.popen.poll() is not None or _stopped(back.popen.pid):
                break
            time.sleep(0.1)
        assert back.popen.poll() is None and _stopped(back.popen.pid)
        second_fix = sd("fix", *target, "--yes", env=env, cwd=tmp_path, timeout=900)
        lines = [ln for ln in second_fix.stderr.splitlines() if ln.strip()]
        assert second_fix.returncode == 6 and len(lines) == 1, (second_fix.returncode, lines)
        assert lines[0].startswith(f"sparkdoctor: error: another sparkdoctor fix or rollback is running on container {name}"), lines
    finally:
        os.kill(back.popen.pid, signal.SIGCONT)
    done = back.result(900)
    assert done.returncode == 0 and "byte for byte" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in site.glob("six-*.dist-info")) == ["six-1.16.0.dist-info"]
