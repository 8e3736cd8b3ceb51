"""Containers' memory cgroups as the runtimes lay them out (cgroup v2, v1's memory hierarchy, systemd's hybrid layout),
read by the local memory preflight (memory/have.py) and a fleet node's probe with one reader
(probes/shared/probe_memlimit.py), and the memory limit of a v1 cgroup without one."""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.memory.have import GIB, cgroup_room, read_have
from sparkdoctor.memory.verdict import holdings
from tests.fleet.hostmem_probe import load_hostmem
from tests.memory.hosts import busy_gb10, gb10_nvml, process

PODMAN = "5e5e5e5e5e5e" + "6" * 52
ROOTLESS = "7a7a7a7a7a7a" + "8" * 52
IN_POD = "9c9c9c9c9c9c" + "a" * 52
V1_UNLIMITED = 9223372036854771712  # memory.limit_in_bytes of a v1 cgroup without a limit (4 KiB pages)
MEMINFO = "MemTotal: 131072000 kB\nMemFree: 90000000 kB\nMemAvailable: 100000000 kB\n"


def _group(folder: Path, usage: str, used: int, procs: list[int] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / usage).write_text(f"{used}\n")
    (folder / "cgroup.procs").write_text("".join(f"{p}\n" for p in procs or []))
    return folder


def _listed(root: Path) -> list[tuple[str, int, list[int]]]:
    """(id, bytes, pids) of each container, from the local preflight; the node probe lists the same."""
    mine = [(c.id, c.bytes, c.pids) for c in read_have(root, nvml=[], ask_nvml=False).containers]
    node = [(c["id"], c["bytes"], c["pids"]) for c in load_hostmem().holders(str(root))["containers"]]
    assert mine == node
    return mine


def test_a_podman_server_whose_processes_are_in_its_scopes_container_child_is_not_a_leftover(tmp_path):
    """crun (podman's runtime) puts a container's processes in the `container` child of its scope on cgroup v2; the
    scope's own cgroup.procs is empty. The serving container was listed with no process and no GPU: "holds memory with
    no process on the GPU (0 process(es) left) ... remove it: docker rm -f" for a server that was running."""
    root = busy_gb10(tmp_path)
    scope = _group(root / "sys/fs/cgroup/machine.slice" / f"libpod-{PODMAN}.scope", "memory.current", 40 * GIB)
    _group(scope / "container", "memory.current", 40 * GIB, [9100])
    process(root, 9100, "vllm", 38 * 2**20, {"3": "/dev/nvidia0"}, f"0::/machine.slice/libpod-{PODMAN}.scope/container\n")
    have = read_have(root, nvml=gb10_nvml(), ask_nvml=False)
    podman = next(c for c in have.containers if c.id == PODMAN[:12])
    assert podman.pids == [9100] and podman.holds_gpu and not podman.leftover
    said = [h.what for h in holdings(have)]
    assert not any(PODMAN[:12] in w and "no process on the GPU" in w for w in said), said
    assert next(c for c in load_hostmem().holders(str(root))["containers"] if c["id"] == PODMAN[:12])["pids"] == [9100]


def test_rootless_and_pod_containers_are_listed(tmp_path):
    """A rootless podman's containers (under the user's systemd manager) and a podman pod's (a slice in machine.slice)
    were not looked for: their memory was nobody's."""
    cg = tmp_path / "sys/fs/cgroup"
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text(MEMINFO)
    (cg / "cgroup.controllers").parent.mkdir(parents=True)
    (cg / "cgroup.controllers").write_text("cpu memory pids\n")
    rootless = cg / "user.slice/user-1000.slice/user@1000.service/user.slice" / f"libpod-{ROOTLESS}.scope"
    _group(_group(rootless, "memory.current", 6 * GIB) / "container", "memory.current", 6 * GIB, [300])
    _group(cg / "machine.slice/machine-libpod_pod_0123abcd.slice" / f"libpod-{IN_POD}.scope", "memory.current", 2 * GIB,
           [400])
    assert _listed(tmp_path) == [(ROOTLESS[:12], 6 * GIB, [300]), (IN_POD[:12], 2 * GIB, [400])]


def _v1_tree(root: Path, hybrid: bool) -> Path:
    """docker under cgroup v1 (its cgroupfs driver: memory/docker/<id>) and under systemd's driver
    (memory/system.slice/docker-<id>.scope); hybrid: cgroup2 on /sys/fs/cgroup/unified too, holding no memory
    controller (the container's v2 twin has no memory files), as on this project's test machine."""
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/meminfo").write_text(MEMINFO)
    cg = root / "sys/fs/cgroup"
    _group(cg / "memory", "memory.usage_in_bytes", 50 * GIB)
    (cg / "memory/memory.limit_in_bytes").write_text(f"{V1_UNLIMITED}\n")
    _group(cg / "memory/docker" / PODMAN, "memory.usage_in_bytes", 3 * GIB, [100])
    _group(cg / "memory/system.slice" / f"docker-{ROOTLESS}.scope", "memory.usage_in_bytes", 2 * GIB, [200])
    _group(cg / "memory/user.slice", "memory.usage_in_bytes", GIB)
    (cg / "memory/user.slice/memory.limit_in_bytes").write_text(f"{V1_UNLIMITED}\n")
    if hybrid:
        (cg / "unified/system.slice" / f"docker-{ROOTLESS}.scope").mkdir(parents=True)
        (cg / "unified/cgroup.controllers").write_text("hugetlb\n")
    (root / "proc/self/cgroup").write_text("4:memory:/user.slice\n1:name=systemd:/user.slice/session-1.scope\n"
                                           + ("0::/user.slice/session-1.scope\n" if hybrid else ""))
    return root


def test_cgroup_v1_and_hybrid_hosts_list_their_containers_and_read_no_limit_as_none(tmp_path):
    """v1's memory hierarchy holds the containers' memory on a v1-only and on a hybrid host; a v1 cgroup without a
    limit (memory.limit_in_bytes 9223372036854771712) is no limit, and a set one is read."""
    for hybrid in (False, True):
        root = _v1_tree(tmp_path / f"hybrid-{hybrid}", hybrid)
        assert _listed(root) == [(PODMAN[:12], 3 * GIB, [100]), (ROOTLESS[:12], 2 * GIB, [200])], hybrid
        assert cgroup_room("self", root) == (None, None)
        (root / "sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes").write_text(f"{8 * GIB}\n")
        assert cgroup_room("self", root) == (8 * GIB, GIB)


def test_a_v1_no_limit_is_none_where_meminfo_cannot_be_read(tmp_path):
    """Without MemTotal to compare with, v1's "no limit" was taken for an 8 EiB limit."""
    root = _v1_tree(tmp_path, hybrid=False)
    (root / "proc/meminfo").unlink()
    assert cgroup_room("self", root) == (None, None)
