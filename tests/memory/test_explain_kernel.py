"""`explain` reads kernel logs (`dmesg`, `journalctl -k`) and knows the memory lines; `check` reports them as host
findings from the live kernel log (/dev/kmsg under SPARKDOCTOR_HOST_ROOT)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.memory.test_postmortem import LOGS


def sparkdoctor(*args, stdin=None, env=None):
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], input=stdin, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("log, entry, how", [
    ("nvrm-no-memory.dmesg", "gb10-driver-out-of-unified-memory", "exact"),
    ("cgroup-oom.dmesg", "host-oom-killer-fired", "exact"),
    ("hung-task.journal", "host-hung-tasks", "exact"),  # the hung_task_timeout_secs line under it
])
def test_explain_knows_the_kernel_lines(log, entry, how):
    p = sparkdoctor("explain", LOGS / log, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    found = {m["id"]: m for m in doc["matches"]}
    assert entry in found and found[entry]["match"] == how
    assert found[entry]["line"] in (LOGS / log).read_text()


def test_explain_reads_pasted_journalctl_output_on_stdin():
    text = "Nov 28 20:31:20 spark-01 kernel: " + (LOGS / "nvrm-no-memory.dmesg").read_text().splitlines()[1].split("] ", 1)[1]
    p = sparkdoctor("explain", "-", stdin=text + "\n")
    assert p.returncode == 0 and "gb10-driver-out-of-unified-memory" in p.stdout


def test_a_memory_cgroups_oom_kill_is_not_called_the_box_running_out():
    """explain matched `Memory cgroup out of memory: Killed process` to an entry titled "The box ran out of memory
    since boot", whose remedy was a lower GPU share: a container at its own limit is not the box out of memory."""
    p = sparkdoctor("explain", LOGS / "cgroup-oom.dmesg", "--format", "json")
    found = {m["id"]: m for m in json.loads(p.stdout)["matches"]}["host-oom-killer-fired"]
    assert "The box ran out of memory since boot" not in found["title"] and "memory cgroup" in found["title"]
    assert "raise it (docker run --memory" in found["remedy"]
