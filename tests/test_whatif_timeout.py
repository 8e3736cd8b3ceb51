"""`whatif` waited on a pip that hangs for 600 s per call, up to three calls (quiet, loud, -vv), and had no --timeout.
`--timeout SECONDS` now bounds the whole run as it does explain's and check's: past it, one line and exit 2 (code
"timeout" in the JSON envelope), and the hanging pip's process group is gone. The target's `pip` here is a stand-in
that writes its pid and sleeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"


def test_a_pip_that_hangs_is_stopped_at_whatifs_timeout(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    pid_file = tmp_path / "pip.pid"
    (purelib / "pip").mkdir()
    (purelib / "pip" / "__init__.py").write_text("")
    (purelib / "pip" / "__main__.py").write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(3600)\n")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": "/dev/null", "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    res = subprocess.run([sys.executable, "-m", "sparkdoctor", "whatif", "demo==0.2.0", "--python", str(venv / "bin" / "python"),
                          "--no-read", "--format", "json", "--timeout", "4"],
                         capture_output=True, text=True, env=env, timeout=300)  # a hang guard only
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "time limit ran out (--timeout 4 s)" in lines[0], res.stderr
    assert [e["code"] for e in json.loads(res.stdout)["errors"]] == ["timeout"], res.stdout
    assert pid_file.exists(), "the stand-in pip never started: the test proves nothing"
    assert not _alive(int(pid_file.read_text())), "the hanging pip outlived whatif"


def test_whatif_refuses_a_timeout_that_is_no_time(tmp_path):
    res = subprocess.run([sys.executable, "-m", "sparkdoctor", "whatif", "demo==0.2.0", "--timeout", "0"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "--timeout 0" in res.stderr and "above 0" in res.stderr, res.stderr
