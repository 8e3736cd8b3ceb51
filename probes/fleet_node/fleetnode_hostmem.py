"""The node's memory and kernel log, for host health on every node, under a root prefix (SPARKDOCTOR_HOST_ROOT,
as the host collectors read a fixture tree). Standard library only, Python 3.8+.

  texts       /proc/meminfo and /proc/pressure/memory as text (64 KiB each): sparkdoctor parses them exactly as
              `check` parses this machine's (sparkdoctor/collect/host_health.py)
  kernel_log  the kernel log's memory lines (the NVIDIA driver out of memory, Xids, the OOM killer, hung tasks):
              the first of /dev/kmsg (no subprocess), `dmesg`, `journalctl -k -b`, /var/log/kern.log (its current
              boot) that answers, each bounded in time and bytes; `dmesg` and the journal are refused without root
              or the right group on many boxes, and each refusal is said. Only lines holding one of WORDS travel
              (sparkdoctor/collect/kernel_log.py parses them: its _WORDS are these).
  holders     who holds the memory a launch could have had, read as sparkdoctor/memory/have.py reads this machine:
              the processes holding a /dev/nvidia* file open (their /proc/PID/fd links) and the largest others
              (100 MiB or more resident), with their resident memory and container, and containers' cgroup memory
              with their processes (`fleet check --recipe` judges the launch against each node's memory).
"""

import collections
import errno
import os
import selectors
import stat
import subprocess
import time

# probes/shared/ (the node's bundle carries it): one reader of small /proc and cgroup files
from probe_memlimit import CONTAINER, _count, _small, _under, containers

WORDS = ("NVRM", "Killed process", "invoked oom-killer", "blocked for more than")
MAX_BYTES = 8 << 20  # of a log read
MAX_LINES = 2000  # memory lines sent (the last ones)
MAX_LINE = 2048
TIMEOUT = 10
TEXTS = {"meminfo": "/proc/meminfo", "pressure": "/proc/pressure/memory"}
MAX_PIDS = 4096  # /proc entries looked at (have.py's bounds)
MAX_FDS = 4096
MAX_OTHERS = 64
LARGE_KIB = 100 * 1024  # a process this large is listed even when it does not use the GPU


def texts(root):
    return {key: _small(_under(root, path)) for key, path in TEXTS.items()}


def _kmsg(root):
    """The ring buffer as /dev/kmsg gives it, one record a read, never blocking (a fixture holds a regular file)."""
    path = _under(root, "/dev/kmsg")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, exc.strerror or str(exc)
    chunks, size = [], 0
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # a tree's file of records: read as a file (8 KiB reads cut its lines)
            while size < MAX_BYTES:
                chunk = os.read(fd, min(1 << 20, MAX_BYTES - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks).decode("utf-8", "replace"), None
        for _ in range(50000):
            try:
                chunk = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading
                    continue
                if exc.errno == errno.EAGAIN:
                    break
                return None, exc.strerror or str(exc)
            if not chunk:
                break
            chunks.append(chunk if chunk.endswith(b"\n") else chunk + b"\n")
            size += len(chunk)
            if size >= MAX_BYTES:
                break
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace"), None


def _command(argv):
    """argv's standard output, or None and why not (it could not start, ran past TIMEOUT seconds and was killed, or
    exited non-zero). Its output is read as it comes and only the last MAX_BYTES kept (64 KiB of its errors):
    subprocess.run held all of it before the cut, so a journal that wrote gigabytes cost the node that much memory."""
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return None, getattr(exc, "strerror", None) or str(exc)
    out, err = _Tail(MAX_BYTES), _Tail(1 << 16)
    tails = {child.stdout.fileno(): out, child.stderr.fileno(): err}
    deadline = time.monotonic() + TIMEOUT
    try:
        with selectors.DefaultSelector() as sel:
            for fd in tails:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map() and time.monotonic() < deadline:
                for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        tails[key.fd].add(chunk)
                    else:
                        sel.unregister(key.fd)
        child.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        if child.returncode is None:  # past the time limit (a hang, or a child that left its pipes to another)
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    if child.returncode < 0 and time.monotonic() >= deadline:
        return None, "timed out after %ss" % TIMEOUT
    if child.returncode != 0:
        said = err.text().strip().splitlines()
        return None, "exit %d: %s" % (child.returncode, said[-1][:200] if said else "no message")
    return out.text(), None


class _Tail:
    """The last `cap` bytes written, kept as chunks: memory stays near the cap however much is written."""

    def __init__(self, cap):
        self.cap, self.size, self.chunks = cap, 0, collections.deque()

    def add(self, chunk):
        self.chunks.append(chunk)
        self.size += len(chunk)
        while self.size - len(self.chunks[0]) >= self.cap:  # the oldest chunk lies wholly before the last cap bytes
            self.size -= len(self.chunks.popleft())

    def text(self):
        return b"".join(self.chunks)[-self.cap:].decode("utf-8", "replace")


def _kern_log(root):
    """/var/log/kern.log's last MAX_BYTES, from the current boot's first line on (syslog keeps several boots)."""
    path = _under(root, "/var/log/kern.log")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))  # a FIFO would block for good
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None, "not a regular file"
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - MAX_BYTES))
            text = fh.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError as exc:
        return None, exc.strerror or str(exc)
    boot = text.rfind("Linux version ")
    return (text[text.rfind("\n", 0, boot) + 1:] if boot >= 0 else text), None


def kernel_log(root, live=None):
    """{"source", "lines", "refused"}: the memory lines of the first kernel log that could be read (source None
    when none could), and why each one tried before it was not. `live`: root is this machine's own (default: it is
    "/"); only then are dmesg and the journal run."""
    live = os.path.realpath(root) == "/" if live is None else live
    readers = [("/dev/kmsg", lambda: _kmsg(root))]
    if live:  # a command reads this machine's log, never a fixture tree's
        readers += [("dmesg", lambda: _command(["dmesg"])),
                    ("journalctl -k", lambda: _command(["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager",
                                                        "-q", "-n", "50000"]))]
    readers.append(("/var/log/kern.log", lambda: _kern_log(root)))
    refused = []
    for name, read in readers:
        text, why = read()
        if text is not None:
            lines = [line[:MAX_LINE] for line in text.splitlines() if any(w in line for w in WORDS)]
            return {"source": name, "lines": lines[-MAX_LINES:], "refused": refused}
        refused.append("%s: %s" % (name, why))
    return {"source": None, "lines": [], "refused": refused}


# the user-space OOM killers' journal lines (earlyoom, systemd-oomd), which never reach the kernel log: the journal of this
# boot, read as sparkdoctor/collect/kernel_log.py reads this machine's (DAEMONS); only their kill lines travel
DAEMONS = ["journalctl", "-b", "-o", "short-monotonic", "--no-pager", "-q", "-n", "2000",
           "SYSLOG_IDENTIFIER=earlyoom", "SYSLOG_IDENTIFIER=systemd-oomd"]
DAEMON_WORDS = ("sending SIG", "Killed /", "Marked /")
MAX_DAEMON_LINES = 200


def daemon_log(root, live=None):
    """{"source", "lines", "refused"}: earlyoom's and systemd-oomd's kill lines in this boot's journal (source None,
    and why, where it could not be read); None under a fixture root, whose journal is not this machine's."""
    if not (os.path.realpath(root) == "/" if live is None else live):
        return None
    text, why = _command(DAEMONS)
    if text is None:
        return {"source": None, "lines": [], "refused": ["journalctl: %s" % why]}
    lines = [line[:MAX_LINE] for line in text.splitlines() if any(w in line for w in DAEMON_WORDS)]
    return {"source": "journalctl", "lines": lines[-MAX_DAEMON_LINES:], "refused": []}


def _rss(root, pid):
    name, rss = None, None
    for line in (_small(_under(root, "/proc/%d/status" % pid)) or "").splitlines():
        key, _, rest = line.partition(":")
        if key == "Name":
            name = rest.strip()[:64] or None
        elif key == "VmRSS" and rest.split():
            rss = _count(rest.split()[0])
    return name, rss


def _devices(root, pid):
    fd = _under(root, "/proc/%d/fd" % pid)
    try:
        entries = os.listdir(fd)[:MAX_FDS]
    except OSError:
        return []  # gone, or another user's
    found = set()
    for entry in entries:
        try:
            target = os.readlink(os.path.join(fd, entry))
        except OSError:
            continue
        if target.startswith("/dev/nvidia"):
            found.add(target)
    return sorted(found)


def _container_of(root, pid):
    match = CONTAINER.search(_small(_under(root, "/proc/%d/cgroup" % pid)) or "")
    return match.group(1)[:12] if match else None


def holders(root):
    """{"holders", "others", "containers", "errors"}: the processes on the GPU and the largest others (pid, name,
    rss_kib, devices, container), and containers' memory with their processes."""
    errors = []
    try:
        pids = sorted(n for n in map(_count, os.listdir(_under(root, "/proc"))) if n is not None and n < 10 ** 10)
    except OSError as exc:
        pids = []
        errors.append("/proc: %s: the processes holding the GPU are unknown" % (exc.strerror or exc))
    if len(pids) > MAX_PIDS:
        errors.append("%d processes: the first %d were looked at" % (len(pids), MAX_PIDS))
    on_gpu, others = [], []
    for pid in pids[:MAX_PIDS]:
        devices = _devices(root, pid)
        name, rss = _rss(root, pid)
        row = {"pid": pid, "name": name, "rss_kib": rss, "devices": devices, "container": None}
        if devices:
            on_gpu.append(row)
        elif rss is not None and rss >= LARGE_KIB:
            others.append(row)
    others = sorted(others, key=lambda r: -r["rss_kib"])[:MAX_OTHERS]
    for row in on_gpu + others:
        row["container"] = _container_of(root, row["pid"])
    return {"holders": on_gpu, "others": others, "containers": containers(root), "errors": errors}
