"""The memory cgroup that binds a process, under a root prefix (a fixture tree, or "/"): one implementation for
`check`'s host health and memory preflight (sparkdoctor/memory/have.py loads it) and every fleet node's probe
(probes/fleet_node/). Standard library only, Python 3.8+.

  limit  the lower of memory.max and memory.high (v2: past memory.high the kernel throttles the cgroup until it stalls)
         or memory.limit_in_bytes (v1), its own cgroup's or an ancestor's, whichever leaves the least room; used less
         the page cache the kernel reclaims first (not shmem). None without a limit below MemTotal.
  v2     where cgroup v2 is mounted: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid v1/v2 host (systemd's
         hybrid layout: /sys/fs/cgroup is then a tmpfs of v1 hierarchies).
  containers  the memory cgroups of docker/podman/CRI containers (v2's mount and v1's memory hierarchy) with their
         usage and the processes in them and in their sub-cgroups (crun puts a podman container's processes in
         the scope's `container` child on cgroup v2).
"""

import glob
import os
import re
import stat

NO_LIMIT = 1 << 60  # a v1 "no limit" (9223372036854771712, page-rounded) where MemTotal is unknown: nothing binds there
CONTAINER = re.compile(r"(?:docker|libpod|cri-containerd|crio)[-/]([0-9a-f]{12,64})")
# Where runtimes make a container's cgroup: under systemd (docker's system.slice, podman's machine.slice and a pod's
# machine-libpod_pod_*.slice in it, a rootless runtime's user manager), their cgroupfs drivers (docker/,
# libpod_parent/), and Kubernetes' pods (kubepods.slice/[QoS slice/]pod slice/).
CONTAINER_PARENTS = ("system.slice", "machine.slice", "machine.slice/*.slice", "docker", "libpod_parent",
                     "user.slice/user-*.slice/user@*.service/user.slice", "kubepods.slice/*.slice",
                     "kubepods.slice/*.slice/*.slice")
MAX_LISTED = 256  # folders looked at per parent, and parents per pattern
MAX_SUBGROUPS = 64  # a container's own sub-cgroups whose processes are read
MAX_PIDS = 4096


def _count(text):
    """A non-negative decimal count as /proc and cgroup files write it, or None ("²".isdigit() is True, and int()
    refuses it and any text past 4,300 digits)."""
    text = (text or "").strip()
    return int(text) if text.isdigit() and len(text) <= 20 and all("0" <= c <= "9" for c in text) else None


def _under(root, path):
    return os.path.join(str(root), path.lstrip("/"))


def _small(path, limit=1 << 16):
    """A small regular file's text, or None: a FIFO or a device under a host root would block the read for good."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with open(fd, "rb") as fh:
        try:
            return fh.read(limit).decode("utf-8", "replace") if stat.S_ISREG(os.fstat(fd).st_mode) else None
        except OSError:
            return None


def v2(root):
    """The cgroup v2 mount under root: /sys/fs/cgroup (unified), else /sys/fs/cgroup/unified where a hybrid host
    mounts it (its cgroup.controllers tells), else /sys/fs/cgroup."""
    if not os.path.isfile(_under(root, "/sys/fs/cgroup/cgroup.controllers")) and \
            os.path.isfile(_under(root, "/sys/fs/cgroup/unified/cgroup.controllers")):
        return "/sys/fs/cgroup/unified"
    return "/sys/fs/cgroup"


def limit(root, pid="self"):
    """{"bytes", "used_bytes", "cgroup"} of the memory cgroup that binds process `pid` under root, or None."""
    total = None
    for line in (_small(_under(root, "/proc/meminfo")) or "").splitlines():
        if line.startswith("MemTotal:") and line.split()[1:]:
            total = _count(line.split()[1])
    best = None
    for line in (_small(_under(root, "/proc/%s/cgroup" % pid)) or "").splitlines()[:64]:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            base, names = v2(root), ("memory.max", "memory.high")
        elif "memory" in controllers.split(","):
            base, names = "/sys/fs/cgroup/memory", ("memory.limit_in_bytes",)
        else:
            continue
        parts = [p for p in path.strip().split("/") if p and p not in (".", "..")][:32]
        for depth in range(len(parts), -1, -1):  # its own cgroup first, then each ancestor
            folder = _under(root, "/".join((base,) + tuple(parts[:depth])))
            limits = [n for n in (_count(_small(os.path.join(folder, name))) for name in names) if n is not None]
            if not limits or min(limits) >= (NO_LIMIT if total is None else min(NO_LIMIT, total * 1024)):
                continue  # a v1 "no limit" is a huge number: anything past MemTotal is none
            used = _used(folder)
            if used is not None:
                used = max(0, used - _file_cache(folder))
            if best is None or min(limits) - (used or 0) < best["bytes"] - (best["used_bytes"] or 0):
                best = {"bytes": min(limits), "used_bytes": used, "cgroup": "/" + "/".join(parts[:depth])}
        if best is not None:
            return best
    return None


def _file_cache(folder):
    """The page cache a cgroup's usage counts that the kernel reclaims before its OOM killer acts (v2 `file`, v1
    `total_cache`, less shmem: tmpfs and /dev/shm pages go only when their files are removed)."""
    counts = dict(ln.split(None, 1) for ln in (_small(os.path.join(folder, "memory.stat")) or "").splitlines()
                  if len(ln.split(None, 1)) == 2)

    def number(*keys):
        return next((n for n in (_count(counts.get(k)) for k in keys) if n is not None), 0)

    return max(0, number("file", "total_cache") - number("shmem", "total_shmem"))



def containers(root):
    """[{"id", "cgroup", "bytes", "pids"}] of the containers' memory cgroups under root, largest first: the id (12 hex
    digits), the cgroup's folder, its usage (v2 memory.current, v1 memory.usage_in_bytes) and the processes in it and
    its sub-cgroups."""
    out = {}
    for base in dict.fromkeys((v2(root), "/sys/fs/cgroup/memory")):
        top = _under(root, base)
        for pattern in CONTAINER_PARENTS:
            try:
                parents = sorted(glob.glob(os.path.join(glob.escape(top), pattern)))[:MAX_LISTED]
            except OSError:
                continue
            for parent in parents:
                try:
                    names = sorted(os.listdir(parent))[:MAX_LISTED]
                except OSError:
                    continue
                for name in names:
                    match = CONTAINER.search(os.path.basename(parent) + "/" + name)
                    folder = os.path.join(parent, name)
                    if not match or match.group(1)[:12] in out or not os.path.isdir(folder):
                        continue
                    used = _used(folder)
                    if used is not None:
                        out[match.group(1)[:12]] = {"id": match.group(1)[:12], "bytes": used, "pids": _procs(folder),
                                                    "cgroup": base + "/" + os.path.relpath(folder, top)}
    return sorted(out.values(), key=lambda c: -c["bytes"])


def _procs(folder):
    """The processes in a cgroup and in its sub-cgroups (cgroup v2 keeps a parent with children empty of its own)."""
    pids = []
    for seen, (here, subgroups, _) in enumerate(os.walk(folder)):
        subgroups.sort()
        if seen >= MAX_SUBGROUPS or len(pids) >= MAX_PIDS:
            break
        pids += [n for n in map(_count, (_small(os.path.join(here, "cgroup.procs")) or "").split()) if n is not None]
    return pids[:MAX_PIDS]


def _used(folder):
    """The cgroup's memory in use, in bytes (v2 memory.current, v1 memory.usage_in_bytes), or None."""
    for leaf in ("memory.current", "memory.usage_in_bytes"):
        used = _count(_small(os.path.join(folder, leaf)))
        if used is not None:
            return used
    return None
