"""Host health: how the box is doing right now, read from /proc, /sys, /etc and NVML.

On a DGX Spark the GPU and the CPU share one pool of LPDDR5X, so the serving stack's worst days come
from the host: little MemAvailable (NVML reports GB10's memory as N/A, so /proc/meminfo is the
source), memory pressure (PSI), swap in use, page cache that holds what CUDA could have had, a GPU
stuck in a low-power state or throttling, several heavy GPU processes at once, a docker without the
NVIDIA runtime, a ConnectX-7 link that is down or slow, and a kernel log that already shows the driver out of
memory, OOM kills or hung tasks since boot (collect/kernel_log.py). Each observation is a fact here; each
judgement is a matrix entry (matrix/host.toml).

Everything is read under host_root() (SPARKDOCTOR_HOST_ROOT; tests feed real-shaped trees). The
readings are of this moment on this box: "live" is True here, and a snapshot loaded later is marked
not live and never judged. NVML is asked only on the real root (collect/gpu_health.py).
"""

from __future__ import annotations

import functools
import os
import types
from pathlib import Path
from typing import Any

from sparkdoctor.collect import Collector, Context
from sparkdoctor.collect.hostroot import host_root, is_live_root
from sparkdoctor.inputs import NumberTooLong, json_answer
from sparkdoctor.locations import shared_probe_module

MAX_READ = 256 * 1024
MEMINFO_KEYS = {"MemTotal": "total_kib", "MemAvailable": "available_kib", "SwapTotal": "swap_total_kib",
                "SwapFree": "swap_free_kib", "Cached": "cached_kib", "Buffers": "buffers_kib", "Shmem": "shmem_kib",
                "SReclaimable": "slab_reclaimable_kib", "Dirty": "dirty_kib", "Hugetlb": "hugetlb_kib",
                "HugePages_Total": "huge_pages_total", "HugePages_Free": "huge_pages_free", "Hugepagesize": "huge_page_kib"}
CDI_DIRS = ("etc/cdi", "var/run/cdi")
RUNTIME_BINARIES = ("usr/bin/nvidia-container-runtime", "usr/local/bin/nvidia-container-runtime")
DOCKER_BINARIES = ("usr/bin/dockerd", "usr/sbin/dockerd", "usr/local/bin/dockerd")
# GB10's PCI id, the same chip in the DGX Spark and its OEM twins (lspci: "VGA compatible controller [0300]:
# NVIDIA Corporation GB20B [GB10] [10de:2e12]", https://wiki.gentoo.org/wiki/DGX_Spark). Read from sysfs, so it
# needs no driver, no NVML and no lspci, and a fixture tree can hold it.
GB10_PCI = "10de:2e12"


def _read(path: Path) -> str | None:
    """A small text file under the root, or None (absent, unreadable, not a regular file)."""
    try:
        if not path.is_file():
            return None
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(MAX_READ)
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isascii() and text.lstrip("-").isdigit() and len(text) <= 18 else None


def memory(root: Path) -> dict[str, object] | None:
    """/proc/meminfo's readings, and whether this memory is a GB10's unified memory (its PCI bus)."""
    mem = memory_of(_read(root / "proc" / "meminfo"))
    if mem is not None:
        mem["unified"] = unified_of(pci_ids(root))
    return mem


def memory_of(text: str | None) -> dict[str, object] | None:
    """/proc/meminfo's text as host health's `memory` readings (a fleet node sends the text: fleet/node.py)."""
    if text is None:
        return None
    raw: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        value = _int(rest.split()[0]) if rest.split() else None
        if name in MEMINFO_KEYS and value is not None and value >= 0:  # a size below 0 is a garbled file, not a size
            raw[MEMINFO_KEYS[name]] = value
    out: dict[str, object] = {k: raw.get(k) for k in ("total_kib", "available_kib", "swap_total_kib")}
    if "swap_total_kib" in raw and "swap_free_kib" in raw and raw["swap_free_kib"] <= raw["swap_total_kib"]:
        out["swap_used_kib"] = raw["swap_total_kib"] - raw["swap_free_kib"]
    if "cached_kib" in raw:
        # clean page cache a `drop_caches` would give back: not shared memory (tmpfs), not dirty pages
        cache = raw["cached_kib"] + raw.get("buffers_kib", 0) - raw.get("shmem_kib", 0)
        out["page_cache_kib"] = max(0, cache)
        out["reclaimable_kib"] = max(0, cache - raw.get("dirty_kib", 0) + raw.get("slab_reclaimable_kib", 0))
    out.update(huge_pages(raw))
    return out


def huge_pages(raw: dict[str, int]) -> dict[str, int]:
    """{"hugetlb_kib", "hugetlb_free_kib"} where huge pages are set aside (vm.nr_hugepages): Hugetlb (every page size,
    Linux 4.15) or else HugePages_Total x Hugepagesize, and of them HugePages_Free x Hugepagesize. Set aside, they are
    in MemTotal but never in MemAvailable: no launch gets them. {} without any."""
    size = raw.get("huge_page_kib")
    total = raw.get("hugetlb_kib", raw.get("huge_pages_total", 0) * size if size else None)
    if not total:
        return {}
    free = raw["huge_pages_free"] * size if size and "huge_pages_free" in raw else None
    return {"hugetlb_kib": total} if free is None else {"hugetlb_kib": total, "hugetlb_free_kib": free}


@functools.cache
def _memlimit() -> types.ModuleType:
    return shared_probe_module("probe_memlimit")  # loaded once: the server's memory watch asks every second


def memory_limit(root: Path, pid: int | str = "self") -> dict[str, object] | None:
    """{"bytes", "used_bytes", "cgroup"}: the memory cgroup that binds process `pid` under root (the lower of v2's
    memory.max and memory.high, v1's memory.limit_in_bytes, its own or an ancestor's), None without a limit below
    MemTotal. The probes' own reader (probes/shared/probe_memlimit.py): one implementation for this machine and every
    fleet node."""
    found = _memlimit().limit(str(root), pid)
    return found if isinstance(found, dict) else None


def container_memory(root: Path) -> list[tuple[str, str, int, list[int]]]:
    """(id, cgroup, bytes, pids) of the containers' memory cgroups under root, largest first, with the processes in
    each and its sub-cgroups. The probes' own reader (probes/shared/probe_memlimit.py), as every fleet node lists
    them."""
    return [(c["id"], c["cgroup"], c["bytes"], c["pids"]) for c in _memlimit().containers(str(root))]


def pci_ids(root: Path) -> list[str] | None:
    """"vendor:device" of each PCI device (lspci -n's form, "10de:2e12"); None where the bus cannot be listed. The
    probes' own reader (probes/shared/probe_pci.py, standard library only), loaded from there: one implementation
    for this machine and every fleet node."""
    ids = shared_probe_module("probe_pci").pci_ids(str(root))
    return ids if isinstance(ids, list) else None


def unified_of(ids: object) -> bool | None:
    """Whether this host's memory is a GB10's unified memory (the GPU allocates from it): a GB10 on its PCI bus.
    None where the bus was not read; a host without a GB10 (a CI builder, a discrete-GPU server) is False."""
    return GB10_PCI in ids if isinstance(ids, list) else None


def pressure(root: Path) -> dict[str, object] | None:
    """PSI memory pressure: the share of time tasks stalled on memory (some: at least one; full: all)."""
    return pressure_of(_read(root / "proc" / "pressure" / "memory"))


def pressure_of(text: str | None) -> dict[str, object] | None:
    """/proc/pressure/memory's text as host health's `pressure` readings."""
    if text is None:
        return None
    out: dict[str, object] = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        if kind not in ("some", "full"):
            continue
        for pair in pairs:
            key, _, value = pair.partition("=")
            if key in ("avg10", "avg60", "avg300"):
                try:
                    out[f"{kind}_{key}"] = float(value) if len(value) <= 20 else None
                except ValueError:
                    out[f"{kind}_{key}"] = None
    return out


def docker_runtime(root: Path) -> dict[str, object] | None:
    """The NVIDIA runtime in docker's daemon.json and the CDI specs that name nvidia.com/gpu; None
    where docker is not installed (nothing to judge)."""
    daemon = root / "etc" / "docker" / "daemon.json"
    text = _read(daemon)
    installed = text is not None or any((root / b).exists() for b in DOCKER_BINARIES)
    if not installed:
        return None
    cdi_specs: list[str] = []
    out: dict[str, object] = {"daemon_json": "/etc/docker/daemon.json" if text is not None else None, "runtimes": [],
                              "default_runtime": None, "cdi_specs": cdi_specs, "nvidia_cdi": False,
                              "nvidia_runtime_binary": any((root / b).exists() for b in RUNTIME_BINARIES)}
    if text is not None and text.strip():
        try:
            conf = json_answer(text)
            out["runtimes"] = sorted(str(k) for k in (conf.get("runtimes") or {}))  # type: ignore[attr-defined]
            out["default_runtime"] = conf.get("default-runtime") if isinstance(conf.get("default-runtime"), str) else None  # type: ignore[attr-defined]
        except (ValueError, AttributeError) as exc:
            out["error"] = f"/etc/docker/daemon.json {exc if isinstance(exc, NumberTooLong) else 'is not a JSON object'}"
    for folder in CDI_DIRS:
        try:
            names = sorted(os.listdir(root / folder))
        except OSError:
            continue
        for name in names:
            if name.endswith((".yaml", ".yml", ".json")):
                cdi_specs.append(f"/{folder}/{name}")
                spec = _read(root / folder / name) or ""
                if "nvidia.com/gpu" in spec:
                    out["nvidia_cdi"] = True
    return out


def links(root: Path) -> list[dict[str, object]] | None:
    """Physical network links (/sys/class/net entries with a device) and InfiniBand/RoCE ports."""
    net = root / "sys" / "class" / "net"
    if not net.is_dir():
        return None
    found: list[dict[str, object]] = []
    for name in sorted(os.listdir(net)):
        dev = net / name
        if not (dev / "device").exists() and not (dev / "device").is_symlink():
            continue  # virtual: lo, bridges, veths, docker0
        try:
            driver = os.path.basename(os.readlink(dev / "device" / "driver"))
        except OSError:
            driver = None
        speed = _int(_read(dev / "speed"))
        found.append({"name": name, "kind": "net", "driver": driver, "state": (_read(dev / "operstate") or "").strip() or None,
                      "speed_mbps": speed if speed is not None and speed > 0 else None, "mtu": _int(_read(dev / "mtu"))})
    ib = root / "sys" / "class" / "infiniband"
    for name in sorted(os.listdir(ib)) if ib.is_dir() else []:
        ports = ib / name / "ports"
        for port in sorted(os.listdir(ports)) if ports.is_dir() else []:
            base = ports / port
            state = (_read(base / "state") or "").strip()
            rate = (_read(base / "rate") or "").strip() or None
            gbps = _int(rate.split()[0]) if rate and rate.split()[0].isdigit() else None
            found.append({"name": name, "kind": "infiniband", "port": _int(port), "driver": None,
                          "state": state.split(":", 1)[-1].strip().lower() if state else None,
                          "speed_mbps": gbps * 1000 if gbps else None, "rate": rate})
    return found


KERNEL_LOG_TIMEOUT = 5.0  # seconds journalctl -k may take here: check's collector has 12 s for all of host health
DAEMON_LOG_TIMEOUT = 3.0  # and the journal of the user-space OOM killers (an indexed query: well under a second)


def kernel(root: Path) -> tuple[dict[str, int] | None, str | None, list[str]]:
    """The memory events in the kernel's log since boot: NV_ERR_NO_MEMORY lines, Xids, OOM kills, hung tasks (None
    where no log can be read), the source read, and why each source tried before it was not. /dev/kmsg, then on this
    machine `journalctl -k` (the post-mortem's reader: Ubuntu's and DGX OS's dmesg_restrict=1 refuses /dev/kmsg to a
    user who is not root, and the adm group may read the journal)."""
    # imported on use: check loads sparkdoctor.collect.kernel_log only on the runs that get here
    from sparkdoctor.collect.kernel_log import counts, parse, read_kernel_log

    log = read_kernel_log(root, timeout=KERNEL_LOG_TIMEOUT)
    return (None if log.text is None else counts(parse(log.text))), log.source, log.refused


def oom_daemons(live: bool) -> dict[str, int] | None:
    """The kills of the user-space OOM killers (earlyoom, systemd-oomd) in this boot's journal, which the kernel log never
    holds; None off this machine or where the journal cannot be read (a fleet node's probe reads its own)."""
    from sparkdoctor.collect.kernel_log import daemon_counts, read_daemon_log

    text = read_daemon_log(live, timeout=DAEMON_LOG_TIMEOUT) if live else None
    return None if text is None else daemon_counts(text)


def observe(root: Path, live: bool = True) -> dict[str, Any]:
    errors: list[str] = []
    out: dict[str, object] = {"live": live, "root": str(root)}
    readers = (("memory", memory), ("memory_limit", memory_limit), ("pressure", pressure), ("docker", docker_runtime),
               ("links", links))
    for key, reader in readers:
        try:
            out[key] = reader(root)
        except Exception as exc:  # one odd file costs its part, never the others
            out[key] = None
            errors.append(f"{key}: {type(exc).__name__}: {exc}"[:300])
    try:
        out["kernel"], out["kernel_source"], refused = kernel(root)
    except Exception as exc:  # as any other part: it costs the kernel counts only
        out["kernel"], out["kernel_source"], refused = None, None, [f"{type(exc).__name__}: {exc}"[:300]]
    out["kernel_refused"] = [r[:300] for r in refused] if out["kernel"] is None else []
    out["oom_daemons"] = oom_daemons(root == Path("/") and live)
    if out["memory"] is None:
        errors.append(f"{root / 'proc/meminfo'} not readable: memory headroom unknown")
    out["errors"] = errors
    return out


def run(ctx: Context) -> dict[str, object]:
    root = host_root()
    health = observe(root)
    if is_live_root():
        # imported on use: check loads sparkdoctor.collect only on the runs that get here
        from sparkdoctor.collect import gpu_health

        health["gpus"], problem = gpu_health.read()
        if problem:
            health["errors"].append(problem)
    else:
        health["gpus"] = None  # a fixture tree has no NVML; this machine's GPU is not that tree's
    return {"host_health": health}


COLLECTOR = Collector("host_health", run, timeout=12)
