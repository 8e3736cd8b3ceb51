"""The kernel log's memory events: the NVIDIA driver out of memory, Xid errors, the OOM killer and its victim,
hung tasks. Read from the text people paste (`dmesg`, `dmesg -T`, `journalctl -k`) or from the live log
(/dev/kmsg under host_root(), read without blocking and without a subprocess; a fixture tree holds a regular
file there).

The line shapes are the kernel's and the driver's own:
  [  394.558841] Memory cgroup out of memory: Killed process 12026 (python3) total-vm:75160kB, anon-rss:65280kB, ...
  [  394.558817] oom-kill:constraint=CONSTRAINT_MEMCG,...,task=python3,pid=12026,uid=0
  NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from ...
  NVRM: Xid (PCI:000f:01:00): 31, pid=2415, name=python3, Ch 00000008, intr 00000000. MMU Fault: ...
  INFO: task python3:4242 blocked for more than 122 seconds.
Pure parsing plus one bounded reader; the post-mortem (sparkdoctor/memory/postmortem.py) and host health
(the counts since boot) use it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sparkdoctor.collect.hostroot import is_live_root

KINDS = ("nvrm-no-memory", "xid", "oom-kill", "oom-invoked", "hung-task")
MAX_RECORDS = 50_000  # /dev/kmsg records read at most (the ring buffer holds far fewer)
MAX_LINE = 2048
MAX_BYTES = 8 * 1024 * 1024  # of a kernel log read
JOURNAL_TIMEOUT = 10.0  # seconds journalctl may take
JOURNAL = ("journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager", "-q", "-n", "50000")  # this boot, kmsg's clock
# the user-space OOM killers, which write to the journal and never to the kernel log: earlyoom (eugr's launcher offers
# it, --earlyoom) and systemd-oomd (Ubuntu desktop's default); two matches of one field are alternatives
DAEMONS = ("journalctl", "-b", "-o", "short-monotonic", "--no-pager", "-q", "-n", "2000",
           "SYSLOG_IDENTIFIER=earlyoom", "SYSLOG_IDENTIFIER=systemd-oomd")
# earlyoom's kill.c: warn("sending %s to process %d uid %d \"%s\": ...") in every release from 1.4 to 1.9.0, with the
# journal's "earlyoom[PID]: " before it, or bare at the start of a line where earlyoom's stderr is read as it is (a
# terminal, where msg.c colours it, or a container's log)
_DAEMON_PATTERNS = [
    ("earlyoom-kill", re.compile(r'(?:earlyoom(?:\[\d{1,10}\])?: |^)sending (?P<signal>SIG[A-Z]{1,8}) '
                                 r'to process (?P<pid>\d{1,10}) uid \d{1,10} "(?P<name>[^"]{0,64})')),
    ("oomd-kill", re.compile(r"systemd-oomd(?:\[\d{1,10}\])?: Killed (?P<name>/\S{1,300}) due to ")),
]

_COLOUR = re.compile(r"\x1b\[[0-9;]{0,16}m")
_STAMP = re.compile(r"^\s*\[\s*(\d{1,10}\.\d{1,9})\]\s*")  # dmesg: seconds since boot
_CTIME = re.compile(r"^\s*\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]\s*")  # dmesg -T
_KMSG = re.compile(r"^(\d{1,3}),(\d{1,20}),(\d{1,20}),[^;]*;")  # /dev/kmsg: prio,seq,usec,flags;
_PATTERNS = [
    ("nvrm-no-memory", re.compile(r"NVRM:.*(?:NV_ERR_NO_MEMORY|Out of memory)")),
    ("xid", re.compile(r"NVRM: Xid \((?P<where>[^)]{0,64})\): (?P<code>\d{1,5})(?:, pid=(?P<pid>\d{1,10}|'<unknown>'))?"
                       r"(?:, name=(?P<name>[^,]{0,64}))?")),
    ("oom-kill", re.compile(r"(?:Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?): "
                            r"Killed process (?P<pid>\d{1,10}) \((?P<name>[^)]{0,64})\)")),
    ("oom-invoked", re.compile(r"(?P<name>\S{1,64}) invoked oom-killer:")),
    ("hung-task", re.compile(r"INFO: task (?P<name>.{1,64}):(?P<pid>\d{1,10}) blocked for more than (?P<secs>\d{1,10}) seconds")),
]

_WORDS = ("NVRM", "Killed process", "invoked oom-killer", "blocked for more than")


@dataclass(frozen=True)
class KernelEvent:
    kind: str  # one of KINDS
    line: str  # the line as the kernel wrote it (stamp and prefix removed), at most MAX_LINE characters
    seconds: float | None = None  # since boot, where the text carries it (dmesg, /dev/kmsg)
    pid: int | None = None
    name: str | None = None
    code: int | None = None  # an Xid's number


def _strip(line: str) -> tuple[str, float | None]:
    """The kernel's own text and its stamp: a record of /dev/kmsg, or a line of dmesg (`-T` too), journalctl -k (any
    `-o`) or kern.log, whose "host kernel: " may come before or after a stamp."""
    match = _KMSG.match(line)
    if match:
        return line[match.end():], int(match.group(3)) / 1e6
    seconds = None
    for _ in range(2):  # "[stamp] host kernel: text" (short-monotonic) or "date host kernel: [stamp] text" (kern.log)
        match = _STAMP.match(line)
        if match:
            line, seconds = line[match.end():], float(match.group(1))
        line = _CTIME.sub("", line, count=1)
        kernel = line.find("kernel: ", 0, 100)  # journalctl -k: "Nov 28 20:31:21 host kernel: ..."
        if kernel >= 0:
            line = line[kernel + 8:]
    return line, seconds


def _lines(text: str, words: tuple[str, ...], since: float | None) -> Iterator[tuple[str, float | None]]:
    """(line without its stamp, seconds since boot or None) of each line holding one of `words` (most of a log does not:
    skipped before any regex runs), not stamped before `since`."""
    for raw in text.splitlines():
        if not any(word in raw for word in words):
            continue
        line, seconds = _strip(raw[:4 * MAX_LINE].rstrip())
        if since is None or seconds is None or seconds >= since:
            yield line, seconds


def parse(text: str, since: float | None = None) -> list[KernelEvent]:
    """Every memory event in `text`, in order; `since` (seconds since boot) drops the stamped lines before it."""
    events = []
    for line, seconds in _lines(text, _WORDS, since):
        for kind, pattern in _PATTERNS:
            match = pattern.search(line)
            if not match:
                continue
            groups = match.groupdict()
            pid = groups.get("pid")
            events.append(KernelEvent(kind, line.strip()[:MAX_LINE], seconds,
                                      int(pid) if pid and pid.isdigit() else None,
                                      (groups.get("name") or "").strip() or None,
                                      int(groups["code"]) if groups.get("code") else None))
            break
    return events


def daemon_kills(text: str, since: float | None = None) -> list[KernelEvent]:
    """The kills of the user-space OOM killers in journal text (`journalctl -o short-monotonic`, any other `-o` too):
    earlyoom's name the victim's pid and name, systemd-oomd's the cgroup it killed (`name`)."""
    events = []
    for line, seconds in _lines(text, ("earlyoom", "systemd-oomd", "sending SIG"), since):
        line = _COLOUR.sub("", line)  # earlyoom's msg.c colours its lines on a tty
        for kind, pattern in _DAEMON_PATTERNS:
            match = pattern.search(line)
            if match:
                pid = match.groupdict().get("pid")
                events.append(KernelEvent(kind, line[match.start():].strip()[:MAX_LINE], seconds, int(pid) if pid else None,
                                          match.group("name")))
                break
    return events


def daemon_counts(text: str) -> dict[str, int]:
    """{"earlyoom_kills", "oomd_kills"}: the user-space OOM killers' kills in journal text (host health's `oom_daemons`
    readings, on this machine and on every fleet node)."""
    found = Counter(e.kind for e in daemon_kills(text))
    return {"earlyoom_kills": found["earlyoom-kill"], "oomd_kills": found["oomd-kill"]}


def read_daemon_log(live: bool | None = None, timeout: float = JOURNAL_TIMEOUT) -> str | None:
    """The journal's lines of the user-space OOM killers in this boot (DAEMONS), time-limited and capped as the kernel
    log's; None off this machine, or where the journal cannot be read."""
    if not (live if live is not None else is_live_root()):
        return None
    from sparkdoctor import proc

    done = proc.run(list(DAEMONS), timeout=timeout, max_output=(0, MAX_BYTES))
    return done.stdout if done.ok else None


def counts(events: list[KernelEvent]) -> dict[str, int]:
    """{"nvrm_no_memory", "xids", "oom_kills", "oom_kills_cgroup", "hung_tasks"}: how many of each (host health's
    readings). `oom_kills` counts the box running out (`Out of memory: Killed process`); a kill inside a memory
    cgroup (`Memory cgroup out of memory: ...`) is a container or a unit that reached its own limit, counted apart:
    on a box that runs capped containers it says nothing about the memory left for a launch."""
    found = Counter(e.kind for e in events)
    cgroup = sum(1 for e in events if e.kind == "oom-kill" and e.line.startswith("Memory cgroup out of memory"))
    return {"nvrm_no_memory": found["nvrm-no-memory"], "xids": found["xid"], "oom_kills": found["oom-kill"] - cgroup,
            "oom_kills_cgroup": cgroup, "hung_tasks": found["hung-task"]}


def _kmsg(root: Path, max_bytes: int = MAX_BYTES) -> tuple[str | None, str]:
    """The kernel's ring buffer as /dev/kmsg gives it (one record a read, never blocking), or a fixture tree's regular
    file of records: (the text, "") or (None, why not: no permission under dmesg_restrict)."""
    path = root / "dev" / "kmsg"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return None, exc.strerror or str(exc)
    chunks: list[bytes] = []
    size = 0
    try:
        info = os.fstat(fd)
        if not os.path.samestat(info, os.stat(path)):
            return None, "replaced while it was opened"
        if stat.S_ISREG(info.st_mode):  # a tree's file of records: read as a file (a line across 8 KiB was cut in two)
            while size < max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes - size))):
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks).decode("utf-8", errors="replace"), ""
        for _ in range(MAX_RECORDS):
            try:
                chunk = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on with the next
                    continue
                break  # EAGAIN: the end of the buffer
            if not chunk:
                break
            chunks.append(chunk if chunk.endswith(b"\n") else chunk + b"\n")
            size += len(chunk)
            if size >= max_bytes:
                break
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace"), ""


@dataclass(frozen=True)
class KernelLog:
    """The kernel log a post-mortem read: its text and which source it came from (None: none could be read), and why
    each source tried before it was not read."""

    text: str | None
    source: str | None
    refused: list[str]


def read_kernel_log(root: Path, live: bool | None = None, timeout: float | None = None) -> KernelLog:
    """/dev/kmsg, and on this machine (`live`: the real root) where it is refused, `journalctl -k` of this boot: on
    Ubuntu (DGX OS) dmesg_restrict=1 refuses /dev/kmsg to a user who is not root, while the adm and systemd-journal
    groups (the first user is in adm) may read the journal. journalctl runs with a time limit and keeps the last
    MAX_BYTES of what it writes (`timeout`: seconds, default JOURNAL_TIMEOUT); a fixture tree's log is never this
    machine's journal."""
    text, why = _kmsg(root)
    if text is not None:
        return KernelLog(text, "/dev/kmsg", [])
    refused = [f"/dev/kmsg: {why}"]
    if live if live is not None else is_live_root():
        from sparkdoctor import proc

        done = proc.run(list(JOURNAL), timeout=JOURNAL_TIMEOUT if timeout is None else timeout,
                        max_output=(0, MAX_BYTES))
        if done.ok and done.stdout.strip():
            return KernelLog(done.stdout, "journalctl -k", refused)
        said = done.stderr.strip().splitlines()
        refused.append("journalctl -k: " + (done.describe_failure() if not done.ok else said[-1][:200] if said
                                            else "no entries (not in the adm or systemd-journal group?)"))
    return KernelLog(None, None, refused)


def uptime(root: Path) -> float | None:
    """Now on the clock the kernel log is stamped with. The kernel stamps its records with a clock that stops while
    the machine is suspended, as CLOCK_MONOTONIC does; /proc/uptime counts the suspended time, so after a suspend
    every record of a launch looked older than the launch (the post-mortem said "nothing pointing at memory" for an
    OOM kill). On this machine that clock is read; under a fixture host root, its /proc/uptime."""
    if Path(root) == Path("/"):
        return time.clock_gettime(time.CLOCK_MONOTONIC)
    try:
        with open(root / "proc" / "uptime", encoding="ascii", errors="replace") as fh:
            return float(fh.read(64).split()[0])
    except (OSError, ValueError, IndexError):
        return None
