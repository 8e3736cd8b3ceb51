"""check's kernel-log counts as a user who is not root: /dev/kmsg is refused under `kernel.dmesg_restrict=1` (Ubuntu,
DGX OS), and they stayed unknown with nothing said. check now falls back to `journalctl -k` as the post-mortem does
(collect/kernel_log.read_kernel_log: a time limit, the last 8 MiB), and its health line says which log it read or
why none could be. journalctl is a stand-in first on PATH; /dev/kmsg is refused by a tree that has none."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparkdoctor.collect import host_health, kernel_log
from sparkdoctor.describe import describe_health

OOM = "[  394.558841] kernel: Out of memory: Killed process 12026 (python3) total-vm:75160kB, anon-rss:65280kB"


def _journalctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """A `journalctl` first on PATH that runs `body` and leaves a mark that it ran."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "journalctl"
    script.write_text(f"#!/bin/sh\n: > {tmp_path / 'ran'}\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    # check's 5 s limit is wall-clock: a stand-in that answers at once must not time out on a loaded machine
    monkeypatch.setattr(host_health, "KERNEL_LOG_TIMEOUT", 600.0)
    return tmp_path / "ran"


def _health(root: Path, monkeypatch: pytest.MonkeyPatch, live: bool) -> dict[str, object]:
    monkeypatch.setattr(kernel_log, "is_live_root", lambda: live)  # the tree stands for this machine's root
    return host_health.observe(root)


def _line(health: dict[str, object]) -> str:
    return describe_health(SimpleNamespace(host_health=health)) or ""


def test_kmsg_refused_the_journal_is_read_and_the_line_says_so(tmp_path, monkeypatch):
    log = tmp_path / "journal.txt"
    log.write_text(f"{OOM}\n[  395.000000] kernel: NVRM: Xid (PCI:000f:01:00): 31, pid=2415, name=python3\n")
    _journalctl(tmp_path, monkeypatch, f"cat {log}")
    health = _health(tmp_path / "root", monkeypatch, live=True)
    assert health["kernel"] == {"nvrm_no_memory": 0, "xids": 1, "oom_kills": 1, "oom_kills_cgroup": 0,
                                "hung_tasks": 0}, health
    assert (health["kernel_source"], health["kernel_refused"]) == ("journalctl -k", [])
    assert "kernel log journalctl -k" in _line(health)


@pytest.mark.parametrize("body, why", [
    ("exec sleep 600", "timed out after 0.5s"),  # a journal on a slow disk, a journalctl waiting on a lock
    ("echo 'Failed to get journal access' >&2; exit 1", "exited 1"),
    ("echo 'No journal files were found.' >&2", "No journal files were found."),  # no journal (this box), exit 0
], ids=["hangs", "fails", "no-journal"])
def test_neither_log_readable_is_said_on_the_line(tmp_path, monkeypatch, body, why):
    _journalctl(tmp_path, monkeypatch, body)
    if "sleep" in body:  # only the hang waits out a short limit; a failing journalctl answers however long it takes
        monkeypatch.setattr(host_health, "KERNEL_LOG_TIMEOUT", 0.5)
    health = _health(tmp_path / "root", monkeypatch, live=True)
    assert health["kernel"] is None and health["kernel_source"] is None, health
    refused = health["kernel_refused"]
    assert isinstance(refused, list) and refused[0].startswith("/dev/kmsg: ") and why in refused[1], refused
    line = _line(health)
    assert "kernel log not read (/dev/kmsg: " in line and why in line, line


@pytest.mark.parametrize("body", [
    "head -c 20000000 /dev/zero | tr '\\0' 'x'; echo",  # one 20 MB line: kept within the 8 MiB cap
    "printf 'Out of memory: Killed process 1 (\\377\\033[2J) total-vm:1kB\\n\\000\\001garbage\\n'",  # non-UTF-8, ESC
], ids=["huge", "garbage"])
def test_a_journal_that_floods_or_writes_garbage_is_read_bounded(tmp_path, monkeypatch, body):
    _journalctl(tmp_path, monkeypatch, body)
    health = _health(tmp_path / "root", monkeypatch, live=True)
    assert health["kernel_source"] == "journalctl -k" and isinstance(health["kernel"], dict), health
    assert "\x1b" not in _line(health)


def test_a_readable_kmsg_is_read_and_a_fixture_tree_never_runs_journalctl(tmp_path, monkeypatch):
    ran = _journalctl(tmp_path, monkeypatch, f"echo '{OOM}'")
    (tmp_path / "root" / "dev").mkdir(parents=True)
    (tmp_path / "root" / "dev" / "kmsg").write_text(f"6,1,394558841,-;{OOM.split('] kernel: ')[1]}\n")
    health = _health(tmp_path / "root", monkeypatch, live=True)
    assert (health["kernel_source"], health["kernel"]["oom_kills"]) == ("/dev/kmsg", 1), health  # type: ignore[index]
    assert "kernel log /dev/kmsg" in _line(health) and not ran.exists()
    tree = _health(tmp_path / "tree", monkeypatch, live=False)  # a fixture tree's log is never this machine's journal
    assert tree["kernel"] is None and len(tree["kernel_refused"]) == 1 and not ran.exists(), tree  # type: ignore[arg-type]
