"""The fleet node probe's kernel log on a node where /dev/kmsg is refused (`kernel.dmesg_restrict=1`, Ubuntu and DGX
OS, a user who is not root): `dmesg` is refused too, and `journalctl -k -b` (the adm and systemd-journal groups may
read it) is the source, said as check's host health says it. Its output is read as it comes, the last 8 MiB kept:
the probe held all of it before the cut. `dmesg` and `journalctl` are stand-ins first on PATH; the tree stands for
the node's live root (`live=True`)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from sparkdoctor.facts import Facts
from sparkdoctor.fleet.node import apply_node
from tests.fleet.hostmem_probe import PROBE, SHARED, load_hostmem

OOM = "[  394.558841] kernel: Out of memory: Killed process 12026 (python3) total-vm:75160kB, anon-rss:65280kB"
REFUSED_DMESG = "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1"


def _probe():
    probe = load_hostmem()
    probe.TIMEOUT = 600  # the node's 10 s is wall-clock: a stand-in that answers at once must not time out under load
    return probe


def _stand_ins(tmp_path: Path, journal: str, dmesg: str = REFUSED_DMESG) -> dict[str, str]:
    """A PATH whose `dmesg` and `journalctl` run these shell bodies."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in (("dmesg", dmesg), ("journalctl", journal)):
        script = folder / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_kmsg_and_dmesg_refused_the_journal_is_the_source_and_said(tmp_path, monkeypatch):
    env = _stand_ins(tmp_path, f"echo '{OOM}'; echo '[  395.000000] kernel: NVRM: Xid (PCI:000f:01:00): 31, pid=2415'")
    monkeypatch.setenv("PATH", env["PATH"])
    log = _probe().kernel_log(str(tmp_path / "node"), live=True)
    assert log["source"] == "journalctl -k" and len(log["lines"]) == 2, log
    assert [r.split(": ")[0] for r in log["refused"]] == ["/dev/kmsg", "dmesg"], log
    assert "Operation not permitted" in log["refused"][1]
    facts = Facts(target={"node": "spark-1"})
    apply_node(facts, {"kernel_log": log}, 0.0, None)
    health = facts.host_health or {}
    assert (health["kernel_source"], health["kernel_refused"]) == ("journalctl -k", [])
    assert health["kernel"] == {"nvrm_no_memory": 0, "xids": 1, "oom_kills": 1, "oom_kills_cgroup": 0, "hung_tasks": 0}


def test_no_log_readable_each_refusal_is_said_as_check_says_it(tmp_path, monkeypatch):
    env = _stand_ins(tmp_path, "echo 'No journal files were found.' >&2; exit 1")
    monkeypatch.setenv("PATH", env["PATH"])
    log = _probe().kernel_log(str(tmp_path / "node"), live=True)
    assert log["source"] is None and [r.split(": ")[0] for r in log["refused"]] == [
        "/dev/kmsg", "dmesg", "journalctl -k", "/var/log/kern.log"], log
    assert log["refused"][2] == "journalctl -k: exit 1: No journal files were found."
    facts = Facts(target={"node": "spark-1"})
    apply_node(facts, {"kernel_log": log}, 0.0, None)
    health = facts.host_health or {}
    assert health["kernel"] is None and health["kernel_refused"] == log["refused"], health


def test_a_journal_that_hangs_is_killed_at_the_time_limit(tmp_path, monkeypatch):
    env = _stand_ins(tmp_path, "exec sleep 600")
    monkeypatch.setenv("PATH", env["PATH"])
    probe = _probe()
    probe.TIMEOUT = 0.5
    log = probe.kernel_log(str(tmp_path / "node"), live=True)
    assert "journalctl -k: timed out after 0.5s" in log["refused"], log


def test_a_tree_that_is_not_live_never_runs_the_nodes_commands(tmp_path, monkeypatch):
    env = _stand_ins(tmp_path, f": > {tmp_path / 'ran'}; echo '{OOM}'", dmesg=f": > {tmp_path / 'ran'}; exit 1")
    monkeypatch.setenv("PATH", env["PATH"])
    log = _probe().kernel_log(str(tmp_path / "node"))
    assert log["source"] is None and not (tmp_path / "ran").exists(), log


FLOOD = """
import importlib.util, json, resource, sys
sys.path.insert(0, sys.argv[3])
spec = importlib.util.spec_from_file_location("fleetnode_hostmem", sys.argv[1])
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
log = probe.kernel_log(sys.argv[2], live=True)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"source": log["source"], "lines": len(log["lines"]), "last": log["lines"][-1][-40:],
                  "grown_kib": grown}))
"""


def test_a_journal_that_floods_costs_the_node_no_more_than_the_cap(tmp_path):
    """48 MB of journal, the OOM line last: it is found, and the probe's peak memory grew by about the 8 MiB cap
    (by more than 48 MB when the whole output was held before the cut)."""
    flood = f"head -c 48000000 /dev/zero | tr '\\0' 'x'; echo; echo '{OOM}'"
    env = _stand_ins(tmp_path, flood)
    done = subprocess.run([sys.executable, "-c", FLOOD, str(PROBE), str(tmp_path / "node"), str(SHARED)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["source"] == "journalctl -k" and got["last"].endswith("anon-rss:65280kB"), got
    assert got["grown_kib"] < 32 * 1024, got


EARLYOOM = ('[  395.101500] spark-1 earlyoom[812]: sending SIGTERM to process 12026 uid 1000 "VLLM::EngineCor": badness 880, '
            "VmRSS 117440 MiB")
OOMD = ("[  395.200000] spark-1 systemd-oomd[640]: Killed /user.slice/user-1000.slice/session-3.scope due to memory "
        "pressure for /user.slice/user-1000.slice being 62.12% > 50.00% for > 20s with reclaim activity")


def test_a_nodes_journal_of_the_user_space_oom_killers_is_read_bounded_and_counted(tmp_path, monkeypatch):
    """earlyoom and systemd-oomd log their kills to the journal, never the kernel log: the node probe read neither, so a
    node whose server earlyoom had ended looked clean. A journal of 40 MB of other lines costs 8 MiB at most; only kill
    lines travel (200 at most)."""
    noise = "[  1.0] spark-1 earlyoom[812]: mem avail: 90000 of 122502 MiB (73.47%), swap free: 0 of 0 MiB"
    body = (f"echo \"$@\" > {tmp_path}/argv; i=0; while [ $i -lt 400000 ]; do echo '{noise}'; i=$((i+1)); done; "
            f"i=0; while [ $i -lt 300 ]; do echo '{EARLYOOM}'; i=$((i+1)); done; echo '{OOMD}'")
    monkeypatch.setenv("PATH", _stand_ins(tmp_path, body)["PATH"])
    log = _probe().daemon_log(str(tmp_path / "node"), live=True)
    assert log["source"] == "journalctl" and len(log["lines"]) == 200 and log["lines"][-1] == OOMD, log["refused"]
    assert "SYSLOG_IDENTIFIER=earlyoom SYSLOG_IDENTIFIER=systemd-oomd" in (tmp_path / "argv").read_text()
    facts = Facts(target={"node": "spark-1"})
    apply_node(facts, {"daemon_log": log}, 0.0, None)
    assert (facts.host_health or {})["oom_daemons"] == {"earlyoom_kills": 199, "oomd_kills": 1}
    assert _probe().daemon_log(str(tmp_path / "node"), live=False) is None  # a tree's journal is not this machine's


def test_a_nodes_journal_that_is_refused_or_hangs_leaves_the_kills_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _stand_ins(tmp_path, "echo 'No journal files were found.' >&2; exit 1")["PATH"])
    probe = _probe()
    log = probe.daemon_log(str(tmp_path / "node"), live=True)
    assert log == {"source": None, "lines": [], "refused": ["journalctl: exit 1: No journal files were found."]}
    facts = Facts(target={"node": "spark-1"})
    apply_node(facts, {"daemon_log": log}, 0.0, None)
    assert (facts.host_health or {})["oom_daemons"] is None
    (tmp_path / "bin" / "journalctl").write_text("#!/bin/sh\nexec sleep 600\n")
    probe.TIMEOUT = 0.5
    assert probe.daemon_log(str(tmp_path / "node"), live=True)["refused"] == ["journalctl: timed out after 0.5s"]
