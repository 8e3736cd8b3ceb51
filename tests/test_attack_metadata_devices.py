"""A target's `.dist-info` whose METADATA is a link to /dev/zero (or a FIFO, or a huge sparse file): check's probe reads
every file through probes/shared/probe_io.py and says "a character device", but fix's inventory (target_dists.py) and
every pip run in the target (target_pip_dry.py: fix's plan, its installs, whatif's dry run) read it with importlib's
unbounded `read_text`. `fix --python` on such a target held its probe for the 60 s time limit while its memory grew to
17.5 GB (measured with /usr/bin/time -v), and whatif's pip was SIGKILLed. Now such a file reads as a missing one: that
one distribution is left out, the rest is read, and each run ends in well under a second of CPU.

Each child here runs under RLIMIT_AS and RLIMIT_CPU, so on the code before the fix the read fails with a MemoryError
instead of taking the machine's memory.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pip

from sparkdoctor.targets.early import script_argv

REPO = Path(__file__).resolve().parents[1]
TARGET_DISTS = REPO / "sparkdoctor" / "fix" / "target_dists.py"
PIP_DRY = REPO / "sparkdoctor" / "targets" / "target_pip_dry.py"
ADDRESS_SPACE = 3 << 30
CPU_SECONDS = 60
MAX_RSS_KB = 512 << 10  # the probe or pip itself needs a few tens of MB


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def _target(tmp_path: Path, fifo: bool = False) -> Path:
    """A venv (`python3 -m venv --without-pip`) with six 1.0 (a plain METADATA) and dists whose METADATA is not a file to
    read whole: one linked to /dev/zero, one a 64 GB sparse file and, with `fifo`, one a FIFO nobody writes to (its
    open blocks for good on the code before: only a run bounded by sparkdoctor's own probe time limit has one)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "six-1.0.dist-info").mkdir()
    (site / "six-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.0\n\n")
    (site / "zeros-1.0.dist-info").mkdir()
    (site / "zeros-1.0.dist-info" / "METADATA").symlink_to("/dev/zero")
    (site / "sparse-1.0.dist-info").mkdir()
    with open(site / "sparse-1.0.dist-info" / "METADATA", "wb") as fh:
        fh.truncate(64 << 30)
    if fifo:
        (site / "fifo-1.0.dist-info").mkdir()
        os.mkfifo(site / "fifo-1.0.dist-info" / "METADATA")
    return venv / "bin" / "python"


# The peak is read by a small parent that forks the child itself: a process started straight from this worker counts
# the worker's own resident pages in its ru_maxrss (Linux carries the forked image's high-water mark across exec), so
# a worker grown past MAX_RSS by earlier tests failed a child that used 30 MB.
_PEAK = """import os, resource, sys
pid = os.fork()
if pid == 0:
    for limit in (resource.RLIMIT_AS, resource.RLIMIT_CPU):
        value = int(sys.argv[2 if limit == resource.RLIMIT_AS else 3])
        resource.setrlimit(limit, (value, value))
    os.execv(sys.argv[4], sys.argv[4:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def _run(argv: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    """`argv` bounded as above; fails when its peak memory passed MAX_RSS (a MemoryError it caught still costs that)."""
    out, err, peak = folder / "stdout", folder / "stderr", folder / "peak"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        code = subprocess.run([sys.executable, "-S", "-c", _PEAK, str(peak), str(ADDRESS_SPACE), str(CPU_SECONDS), *argv],
                              stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, timeout=600).returncode
    peak_kb = int(peak.read_text())
    assert peak_kb < MAX_RSS_KB, f"{peak_kb} kB at its peak: {err.read_text()[-2000:]}"
    return subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())


def test_fixs_inventory_leaves_a_device_or_sparse_metadata_out_and_reads_the_rest(tmp_path):
    target = _target(tmp_path)
    done = _run(script_argv(str(target), str(TARGET_DISTS), []), tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    dists = json.loads(done.stdout.splitlines()[-1])["dists"]
    assert dists["six"]["version"] == "1.0"
    assert not {"zeros", "sparse"} & set(dists), sorted(dists)


def test_pip_in_the_target_skips_a_device_or_sparse_metadata(tmp_path):
    target = _target(tmp_path)
    own_pip = str(Path(pip.__file__).resolve().parents[1])
    done = _run(script_argv(str(target), str(PIP_DRY), ["--pip-from", own_pip, "list", "--format", "json",
                                                         "--disable-pip-version-check", "--no-index"]), tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {d["name"] for d in json.loads(done.stdout.splitlines()[-1])} == {"six"}


def test_fix_on_such_a_target_answers_in_json(tmp_path):
    target = _target(tmp_path, fifo=True)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "PIP_NO_INDEX": "1"}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fix", "--python", str(target), "--no-kernels",
                           "--format", "json"], capture_output=True, text=True, preexec_fn=_bounded, env=env,
                          stdin=subprocess.DEVNULL, cwd=tmp_path)
    document = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr[-2000:]
    assert document["command"] == "fix" and document.get("kind") != "error", document
