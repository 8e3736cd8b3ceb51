"""The memory preflight and post-mortem against hostile and odd input: /proc and cgroup files with digits that are not
ASCII, numbers past Python's int-from-text limit, negative sizes, a cgroup's soft limit (memory.high), and the kernel
log when /dev/kmsg is refused (Ubuntu's dmesg_restrict=1 for a user who is not root) with a journalctl that answers,
hangs, floods or is missing. Each test failed on the code before its fix (docs/evidence/revmemory-2026-11-30.md)."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest

from sparkdoctor.memory.have import GIB, cgroup_room, read_have, sample
from sparkdoctor.memory.postmortem import classify, one_line
from tests.memory.hosts import container, process

MEMINFO = "MemTotal: 131072000 kB\nMemFree: {free} kB\nMemAvailable: 100000000 kB\n"


@pytest.mark.parametrize("odd", ["\u00b2\u00b3", "9" * 5000, "\u0663\u0664"], ids=["superscripts", "5000-digits", "arabic-indic"])
def test_numbers_that_are_not_plain_decimal_are_unknown_not_an_internal_error(tmp_path, odd):
    """`str.isdigit` is True for "²³" and "٣٤", and `int()` refuses both (and any text of more than 4,300 digits): a
    /proc or cgroup file holding one ended `recipe check` and `bench` with "internal error: ValueError"."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(MEMINFO.format(free=odd))
    process(tmp_path, 4242, "python3", 1, {"3": "/dev/nvidia0"})
    (tmp_path / "proc" / "4242" / "status").write_text(f"Name:\tpython3\nVmRSS:\t{odd} kB\n")
    container(tmp_path, "ab" * 32, 5 * GIB, [4242])
    group = tmp_path / "sys" / "fs" / "cgroup" / "system.slice" / f"docker-{'ab' * 32}.scope"
    (group / "cgroup.procs").write_text(f"4242\n{odd}\n")
    (group / "memory.max").write_text(f"{odd}\n")
    (group / "memory.stat").write_text(f"anon 1\nfile {odd}\n")
    (tmp_path / "proc" / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{'ab' * 32}.scope\n")
    have = read_have(tmp_path, ask_nvml=False)
    assert have.free_bytes is None and have.available_bytes == 100000000 * 1024
    assert [(h.pid, h.rss_bytes) for h in have.holders] == [(4242, None)] and have.containers[0].pids == [4242]
    assert cgroup_room(4242, tmp_path) == (None, None) and sample({4242}, tmp_path) == (100000000 * 1024, None)
    (group / "memory.max").write_text(f"{8 * GIB}\n")  # a readable limit with a garbled memory.stat: its cache is 0
    assert cgroup_room(4242, tmp_path) == (8 * GIB, 5 * GIB)


def test_negative_sizes_in_meminfo_are_unknown_not_a_negative_utilization(tmp_path):
    """MemTotal: -125511680 kB gave `--gpu-memory-utilization -0.76` and "-59.8 GiB asked" as a verdict."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: -125511680 kB\nMemFree: 1 kB\nMemAvailable: -5 kB\n"
                                               "SwapTotal: 0 kB\nSwapFree: 7 kB\n")
    have = read_have(tmp_path, ask_nvml=False)
    assert have.total_bytes is None and have.available_bytes is None and have.usable_bytes is None
    assert have.swap_used_bytes is None  # SwapFree above SwapTotal: no negative swap in use
    assert any("no MemTotal or MemAvailable" in e for e in have.errors)


def test_a_cgroups_memory_high_binds_as_its_memory_max_does(tmp_path):
    """cgroup v2's memory.high (systemd MemoryHigh=, Kubernetes' memory QoS): past it the kernel throttles the cgroup's
    allocations and reclaims until they stall, without an OOM kill; a launch sized past it hangs. Only memory.max was
    read, so a box with 90 GiB available under an 8 GiB memory.high was judged as 90 GiB of room."""
    (tmp_path / "proc" / "77").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text(MEMINFO.format(free=90000000))
    (tmp_path / "proc" / "77" / "cgroup").write_text("0::/system.slice/serve.service\n")
    group = tmp_path / "sys" / "fs" / "cgroup" / "system.slice" / "serve.service"
    group.mkdir(parents=True)
    (group / "memory.max").write_text("max\n")
    (group / "memory.high").write_text(f"{8 * GIB}\n")
    (group / "memory.current").write_text(f"{GIB}\n")
    assert cgroup_room(77, tmp_path) == (8 * GIB, GIB)
    from sparkdoctor.memory.verdict import holdings

    have = read_have(tmp_path, ask_nvml=False)
    have.limit_bytes, have.limit_used_bytes = cgroup_room(77, tmp_path)  # read_have reads it for this process only
    assert "MemoryHigh=" in holdings(have)[0].remedy  # the remedy names the setting that may be the one binding
    (group / "memory.max").write_text(f"{4 * GIB}\n")  # the lower of the two binds
    assert cgroup_room(77, tmp_path) == (4 * GIB, GIB)
    (group / "memory.high").write_text("max\n")
    (group / "memory.max").write_text("max\n")
    assert cgroup_room(77, tmp_path) == (None, None)


def test_a_sigkill_with_no_kernel_log_readable_does_not_say_nothing_points_at_memory():
    """As a user who is not root on Ubuntu (dmesg_restrict=1) /dev/kmsg is refused; the post-mortem of a server
    killed by SIGKILL said "crash ... with nothing pointing at memory ... nothing memory-related", never that the kernel
    log, where the OOM killer names its victim, had not been read."""
    pm = classify("", ["INFO: loading weights"], pids={12026}, returncode=-signal.SIGKILL, kernel_source=None,
                  kernel_refused=["/dev/kmsg: Operation not permitted", "journalctl -k: No journal files were found"])
    line = one_line(pm)
    assert pm.cause == "crash" and "nothing pointing at memory" not in line and "nothing memory-related" not in line
    assert "the kernel log could not be read (/dev/kmsg: Operation not permitted; journalctl -k: No journal" in line
    assert "SIGKILL is what the kernel's OOM killer sends" in pm.avoid and "sudo dmesg" in pm.avoid
    read = classify("", [], pids={12026}, returncode=-signal.SIGKILL, kernel_source="/dev/kmsg")
    assert read.cause == "crash" and "nothing pointing at memory" in read.summary  # a log read and silent says so
    assert "kernel: /dev/kmsg read: no memory event in the launch's window" in read.evidence


JOURNAL = ("[  394.558817] spark-1 kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
           "global_oom,task_memcg=/user.slice/user-1000.slice/session-2.scope,task=VLLM::EngineCor,pid=12026,uid=1000\n"
           "[  394.558841] spark-1 kernel: Out of memory: Killed process 12026 (VLLM::EngineCor) total-vm:131230556kB, "
           "anon-rss:117440512kB, file-rss:5408kB, shmem-rss:0kB, UID:1000 pgtables:230188kB oom_score_adj:0\n")


def _journalctl(folder: Path, body: str) -> dict[str, str]:
    """A `journalctl` first on PATH that runs `body` (a shell script's lines), and the environment to find it."""
    folder.mkdir(exist_ok=True)
    script = folder / "journalctl"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_the_journal_is_read_when_kmsg_is_refused_and_names_the_oom_victim(tmp_path, monkeypatch):
    from sparkdoctor.collect.kernel_log import read_kernel_log

    text = tmp_path / "journal.txt"
    text.write_text(JOURNAL)
    env = _journalctl(tmp_path / "bin", f'echo "$@" > {tmp_path}/argv; cat {text}')
    monkeypatch.setenv("PATH", env["PATH"])
    # journalctl's 10 s is wall-clock: a stand-in that answers at once must not time out on a loaded machine
    log = read_kernel_log(tmp_path / "no-root", live=True, timeout=600)  # a root without dev/kmsg: refused, then the journal
    assert log.source == "journalctl -k" and log.refused and log.refused[0].startswith("/dev/kmsg")
    assert (tmp_path / "argv").read_text().split()[:2] == ["-k", "-b"]
    pm = classify(log.text or "", [], since=390.0, pids={12026}, returncode=-signal.SIGKILL, kernel_source=log.source)
    assert pm.cause == "oom-killed" and pm.victim == {"pid": 12026, "name": "VLLM::EngineCor"}
    assert "stop what else holds memory" in pm.avoid


@pytest.mark.parametrize("body, why", [
    ("exec sleep 600", "timed out after 0.5s"),  # a journal on a slow disk, a journalctl waiting on a lock
    ("exit 1", "exited 1"),
    ("head -c 20000000 /dev/zero | tr '\\0' 'x'; echo", None),  # one 20 MB line: kept within the 8 MiB cap
    ("printf 'Out of memory: Killed process 1 (\\377\\033[2J) total-vm:1kB\\n'", None),  # non-UTF-8, an escape
], ids=["hangs", "fails", "one-20-MB-line", "non-utf8-and-escape"])
def test_a_journalctl_that_hangs_fails_or_floods_is_bounded(tmp_path, monkeypatch, body, why):
    from sparkdoctor.collect import kernel_log

    # only the hang waits out a short limit; the others end by themselves, however loaded the machine
    monkeypatch.setattr(kernel_log, "JOURNAL_TIMEOUT", 0.5 if why and "timed out" in why else 600.0)
    monkeypatch.setenv("PATH", _journalctl(tmp_path / "bin", body)["PATH"])
    log = kernel_log.read_kernel_log(tmp_path, live=True)
    if why:
        assert log.text is None and log.source is None and any(why in r for r in log.refused), log.refused
    else:
        assert log.source == "journalctl -k" and log.text is not None and len(log.text) <= kernel_log.MAX_BYTES + 200


def test_a_missing_journalctl_is_said(tmp_path, monkeypatch):
    from sparkdoctor.collect.kernel_log import read_kernel_log

    monkeypatch.setenv("PATH", str(tmp_path))  # no journalctl anywhere on it
    log = read_kernel_log(tmp_path, live=True)
    assert log.text is None and any(r.startswith("journalctl -k: ") for r in log.refused)
    fixture = read_kernel_log(tmp_path, live=False)  # a fixture tree: never this machine's journal
    assert fixture.refused == [f"/dev/kmsg: {fixture.refused[0].split(': ', 1)[1]}"]


def _hostmem():
    """The fleet node probe's memory module, loaded from its file as the node runs it."""
    from tests.fleet.hostmem_probe import load_hostmem

    return load_hostmem("fleetnode_hostmem_under_test")


def test_a_fleet_nodes_probe_reads_odd_numbers_as_unknown(tmp_path):
    """The node probe reads /proc and cgroups as have.py does, and had the same `isdigit` reads: one process with
    "²" in its VmRSS cost the node every holder ("memory holders: ValueError")."""
    hostmem = _hostmem()
    process(tmp_path, 42, "python3", 1, {"3": "/dev/nvidia0"})
    (tmp_path / "proc" / "42" / "status").write_text("Name:\tpython3\nVmRSS:\t\u00b2 kB\n")
    container(tmp_path, "cd" * 32, 5 * GIB, [42])
    (tmp_path / "sys/fs/cgroup/system.slice" / f"docker-{'cd' * 32}.scope" / "cgroup.procs").write_text("42\n\u0663\n")
    found = hostmem.holders(str(tmp_path))
    assert [(h["pid"], h["rss_kib"]) for h in found["holders"]] == [(42, None)]
    assert [(c["bytes"], c["pids"]) for c in found["containers"]] == [(5 * GIB, [42])]


def test_a_nodes_process_named_with_terminal_escapes_is_printed_spelled_out(tmp_path):
    """Any user on a node can name a process (prctl PR_SET_NAME) "\\x1b[2J\\x1b]0;x": `fleet check --recipe` printed the
    holder's name raw (rich's markup escape leaves control characters), clearing the terminal of whoever ran it."""
    from sparkdoctor.memory.pernode import size_launch
    from tests.audit import builders
    from tests.fleet.test_fleet_memory_fit import console_text, gate, healthy, strained
    from tests.memory.conftest import write_recipe

    model = builders.qwen3_8b(tmp_path / "qwen3-8b", None)
    recipe = write_recipe(tmp_path, model, "--max-model-len", "32768", "--tensor-parallel-size", "2",
                          "--gpu-memory-utilization", "0.7")
    root = strained(tmp_path)
    process(root, 5151, "\x1b[2J\x1b]0;x", 20 * 2**20, {"3": "/dev/nvidia0"})
    text = console_text(gate(size_launch(str(recipe), {}, None), {"spark-1": healthy(tmp_path), "spark-2": root}))
    (held,) = [line for line in text.splitlines() if "pid 5151" in line]
    assert "\x1b" not in text and "held: pid 5151 (\\x1b[2J\\x1b]0;x) holds /dev/nvidia0" in held


def test_huge_pages_set_aside_are_named_as_what_holds_the_memory(tmp_path):
    """80 GiB of huge pages (vm.nr_hugepages 40960 of 2 MiB) on a 119.7 GiB box: `recipe check` said "does not fit,
    2.9 GiB short ... free memory first", naming nothing that held the 80 GiB (MemAvailable never counts them)."""
    from sparkdoctor.memory.verdict import holdings

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(
        "MemTotal: 125511680 kB\nMemFree: 20000000 kB\nMemAvailable: 21000000 kB\nCached: 1000000 kB\n"
        "HugePages_Total:   40960\nHugePages_Free:    40000\nHugePages_Rsvd:        0\nHugepagesize:       2048 kB\n"
        "Hugetlb:        83886080 kB\n")
    have = read_have(tmp_path, ask_nvml=False)
    assert (have.hugetlb_bytes, have.hugetlb_free_bytes) == (80 * GIB, 40000 * 2 * 2**20)
    first = holdings(have)[0]
    assert first.bytes == 80 * GIB and first.what.startswith("huge pages set aside (vm.nr_hugepages")
    assert "echo 0 | sudo tee /proc/sys/vm/nr_hugepages" in first.remedy
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: 125511680 kB\nMemAvailable: 21000000 kB\nHugePages_Total: 0\n"
                                               "HugePages_Free: 0\nHugepagesize: 2048 kB\nHugetlb: 0 kB\n")
    assert read_have(tmp_path, ask_nvml=False).hugetlb_bytes is None  # none set aside: nothing said


def test_fifos_under_a_host_root_are_unreadable_not_a_hang(tmp_path):
    """SPARKDOCTOR_HOST_ROOT at a tree whose proc/meminfo (or a process's status, a cgroup's memory.max) is a FIFO:
    `recipe check` blocked in open() until it was killed (60 s here, rc 124)."""
    from tests.hostile import hang_guard

    (tmp_path / "proc").mkdir()
    os.mkfifo(tmp_path / "proc" / "meminfo")
    process(tmp_path, 4242, "python3", 1, {"3": "/dev/nvidia0"})
    (tmp_path / "proc" / "4242" / "status").unlink()
    os.mkfifo(tmp_path / "proc" / "4242" / "status")
    (tmp_path / "proc" / "4242" / "cgroup").write_text("0::/stuck\n")
    (tmp_path / "sys" / "fs" / "cgroup" / "stuck").mkdir(parents=True)
    os.mkfifo(tmp_path / "sys" / "fs" / "cgroup" / "stuck" / "memory.max")
    with hang_guard(60):
        have = read_have(tmp_path, ask_nvml=False)
        assert cgroup_room(4242, tmp_path) == (None, None)
        node = _hostmem().holders(str(tmp_path))  # a fleet node's probe reads the same files the same way
        (tmp_path / "var" / "log").mkdir(parents=True)
        os.mkfifo(tmp_path / "var" / "log" / "kern.log")
        log = _hostmem().kernel_log(str(tmp_path))
    assert log["source"] is None and "/var/log/kern.log: not a regular file" in log["refused"]
    assert have.total_bytes is None and [(h.pid, h.name, h.rss_bytes) for h in have.holders] == [(4242, None, None)]
    assert [(h["pid"], h["name"], h["rss_kib"]) for h in node["holders"]] == [(4242, None, None)]


EARLYOOM = ("[  395.101000] spark-1 earlyoom[812]: mem avail:  1802 of 122570 MiB ( 1.47%), swap free:    0 of    0 MiB ( 0.00%)\n"
            "[  395.101200] spark-1 earlyoom[812]: low memory! at or below SIGTERM limits: mem 10.00%, swap 10.00%\n"
            '[  395.101500] spark-1 earlyoom[812]: sending SIGTERM to process 12026 uid 1000 "VLLM::EngineCor": badness 880, '
            "VmRSS 117440 MiB\n"
            "[  395.310000] spark-1 earlyoom[812]: process exited after 0.2 seconds\n")
OOMD = ("[  395.200000] spark-1 systemd-oomd[640]: Killed /user.slice/user-1000.slice/user@1000.service/app.slice/vllm.scope "
        "due to memory pressure for /user.slice/user-1000.slice/user@1000.service being 62.12% > 50.00% for > 20s with "
        "reclaim activity\n")


def test_a_user_space_oom_killer_is_named_from_the_journal(tmp_path, monkeypatch):
    """earlyoom (eugr's launcher offers it) and systemd-oomd kill from user space: the kernel log holds nothing, and
    the post-mortem said "crash ... nothing pointing at memory" for a server earlyoom had ended."""
    from sparkdoctor.collect.kernel_log import read_daemon_log

    before = classify("", ["INFO: loading weights"], pids={12026}, returncode=-signal.SIGTERM, kernel_source="/dev/kmsg")
    assert before.cause == "crash"  # with no journal text there is nothing to go on: the same answer as before
    pm = classify("", ["INFO: loading weights"], since=390.0, pids={12026}, returncode=-signal.SIGTERM,
                  kernel_source="/dev/kmsg", daemon_text=EARLYOOM)
    assert pm.cause == "oom-killed" and pm.victim == {"pid": 12026, "name": "VLLM::EngineCor"}
    assert pm.summary.startswith("earlyoom, a user-space OOM killer, killed the server (pid 12026, VLLM::EngineCor)")
    assert pm.evidence[0].startswith('journal: earlyoom[812]: sending SIGTERM to process 12026 uid 1000 "VLLM::EngineCor"')
    assert "earlyoom kills at its own thresholds" in pm.avoid
    other = classify("", [], since=390.0, pids={777}, returncode=-signal.SIGTERM, daemon_text=EARLYOOM)
    assert other.cause == "crash"  # another process's kill is not the server's
    late = classify("", [], since=396.0, pids={12026}, returncode=-signal.SIGTERM, daemon_text=EARLYOOM)
    assert late.cause == "crash"  # before the launch's window
    oomd = classify("", [], since=390.0, pids={12026}, returncode=-signal.SIGKILL, daemon_text=OOMD)
    assert oomd.cause == "crash" and any(e.startswith("journal: systemd-oomd[640]: Killed /user.slice/") for e in oomd.evidence)
    assert "ManagedOOMMemoryPressure" in oomd.avoid
    journal = tmp_path / "daemons.txt"
    journal.write_text(EARLYOOM + OOMD)
    monkeypatch.setenv("PATH", _journalctl(tmp_path / "bin", f'echo "$@" > {tmp_path}/argv; cat {journal}')["PATH"])
    # its 10 s is wall-clock: a stand-in that answers at once must not time out on a loaded machine
    assert read_daemon_log(live=True, timeout=600) == EARLYOOM + OOMD and read_daemon_log(live=False) is None
    assert "SYSLOG_IDENTIFIER=earlyoom" in (tmp_path / "argv").read_text()


def test_earlyooms_bare_line_in_the_servers_log_names_the_kill():
    """earlyoom started beside the server (its container's entrypoint, a launch script) writes its kill line bare to the
    same log, without the journal's `earlyoom[PID]: ` (kill.c's warn(); coloured on a tty by msg.c): the post-mortem
    said "crash" for a server it had ended."""
    lines = ["INFO: loading weights", "low memory! at or below SIGTERM limits: mem 10.00%, swap 10.00%",
             '\x1b[33msending SIGTERM to process 12026 uid 0 "python3": oom_score 880, oom_score_adj 0, VmRSS 117440 MiB, '
             'cmdline "python3 -m vllm.entrypoints.openai.api_server"\x1b[0m']
    pm = classify("", lines, since=390.0, pids={12026}, returncode=-signal.SIGTERM, kernel_source="/dev/kmsg")
    assert pm.cause == "oom-killed" and pm.victim == {"pid": 12026, "name": "python3"}
    assert pm.evidence[0].startswith('server: sending SIGTERM to process 12026 uid 0 "python3"')
    assert classify("", lines, pids={777}, returncode=-signal.SIGTERM, kernel_source="/dev/kmsg").cause == "crash"
    echo = ["Sending SIGTERM to process 12026...", "[launch] sending SIGTERM to process 12026 uid 0 \"python3\""]
    assert classify("", echo, pids={12026}, returncode=-signal.SIGTERM, kernel_source="/dev/kmsg").cause == "crash"


def test_checks_host_health_counts_the_user_space_oom_killers_kills(tmp_path, monkeypatch):
    """check's host health reads this boot's journal of earlyoom and systemd-oomd (the same readings every fleet node
    sends: host-earlyoom-killed and host-systemd-oomd-killed fire on them); a fixture tree's journal is never read."""
    from sparkdoctor.collect import host_health
    from sparkdoctor.collect.host_health import observe, oom_daemons

    # check's 3 s for this journal is wall-clock: a stand-in that answers at once must not time out on a loaded machine
    monkeypatch.setattr(host_health, "DAEMON_LOG_TIMEOUT", 600.0)
    monkeypatch.setenv("PATH", _journalctl(tmp_path / "bin", f"cat {tmp_path}/journal")["PATH"])
    (tmp_path / "journal").write_text(EARLYOOM + OOMD)
    assert oom_daemons(True) == {"earlyoom_kills": 1, "oomd_kills": 1}
    assert observe(tmp_path, live=True)["oom_daemons"] is None  # not this machine's root
    (tmp_path / "bin" / "journalctl").write_text("#!/bin/sh\necho 'No journal files were found.' >&2; exit 1\n")
    assert oom_daemons(True) is None


def test_a_kmsg_file_in_a_tree_is_read_whole_lines(tmp_path):
    """A host root's dev/kmsg that is a regular file (a fixture, a copied tree) was read in 8 KiB reads with a line
    break added after each, as /dev/kmsg gives one record a read: the OOM line across the 8,192nd byte was cut in two
    and the post-mortem missed the kill."""
    from sparkdoctor.collect.kernel_log import parse, read_kernel_log

    oom = ("3,9999,394558841,-;Out of memory: Killed process 12026 (python3) total-vm:131230556kB, anon-rss:117440512kB, "
           "file-rss:5408kB, shmem-rss:0kB, UID:1000 pgtables:230188kB oom_score_adj:0\n")
    filler = "6,1,1000,-;" + "x" * (8192 - 11 - 40) + "\n"  # the OOM line starts 40 bytes before the 8,192nd
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text(filler + oom)
    assert [(e.kind, e.pid, e.seconds) for e in parse(read_kernel_log(tmp_path, live=False).text or "")] == [("oom-kill", 12026, 394.558841)]
    node = _hostmem().kernel_log(str(tmp_path))  # a fleet node's probe reads its tree's file the same way
    assert node["source"] == "/dev/kmsg" and [line[:40] for line in node["lines"]] == [oom[:40]]


def test_a_nodes_meminfo_with_odd_digits_costs_its_free_figure_not_the_fleet(tmp_path):
    """A node whose meminfo text says `MemFree: ² kB`: fleet/node.py read it with str.isdigit and int() raised
    ValueError out of the node's answer (not one of the errors that cost a node): `fleet check` ended on it."""
    import time

    from sparkdoctor.fleet.node import apply_node
    from tests.fleet.test_fleet_compare import fleet_facts
    from tests.fleet.test_fleet_hostmem import node_answer
    from tests.fleet.test_fleet_memory_fit import healthy

    root = healthy(tmp_path)
    text = (root / "proc" / "meminfo").read_text()
    (root / "proc" / "meminfo").write_text(text.replace("MemFree:", "MemFree: \u00b2 kB\nOldFree:"))
    facts = fleet_facts("spark-1")
    apply_node(facts, node_answer(root), time.time(), None)
    held = (facts.fleet or {})["memory"]
    assert held["free_kib"] is None and facts.host_health["memory"]["available_kib"] == 98 * 2**20


@pytest.mark.parametrize("value", ["\u00b2", "9" * 5000], ids=["superscript", "5000-digits"])
def test_a_parallel_size_that_is_not_a_plain_number_is_one_line(tmp_path, value):
    """`--tensor-parallel-size ²` (or 5,000 nines) with `recipe check --model`: internal error: ValueError, exit 2."""
    from sparkdoctor.audit.errors import AuditError
    from sparkdoctor.memory.need import launch_need
    from tests.audit import builders
    from tests.memory.conftest import recipe

    model = builders.qwen3_8b(tmp_path / "qwen3-8b", None)
    with pytest.raises(AuditError, match="--tensor-parallel-size .* is not a whole number from 1 to 1024"):
        launch_need(recipe(tmp_path, model, "--tensor-parallel-size", value), model, 128 * GIB)


def test_odd_names_in_proc_and_cuda_visible_devices_are_not_an_internal_error(tmp_path, monkeypatch):
    """A folder named "²" under a host root's proc, or CUDA_VISIBLE_DEVICES=², passed `isdigit` into `int()`."""
    from sparkdoctor.memory.have import _visible

    (tmp_path / "proc" / "\u00b2").mkdir(parents=True)
    process(tmp_path, 42, "python3", 1, {"3": "/dev/nvidia0"})
    assert [h.pid for h in read_have(tmp_path, ask_nvml=False).holders] == [42]
    assert [h["pid"] for h in _hostmem().holders(str(tmp_path))["holders"]] == [42]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "\u00b2")
    assert _visible(["gpu0", "gpu1"]) == ["gpu0", "gpu1"]  # not indices: left as NVML lists them
