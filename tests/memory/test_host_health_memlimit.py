"""`check`'s host health reads the huge pages and the memory cgroup's limit a fleet node's probe reads, with the same
code (probes/shared/probe_memlimit.py), and a hybrid cgroup v1/v2 host's v2 hierarchy where it is mounted."""

from __future__ import annotations

from sparkdoctor.collect.host_health import observe
from sparkdoctor.memory.have import cgroup_room, read_have
from tests.probe_modules import probe_module

GIB = 2**30
MEMINFO = ("MemTotal: 131072000 kB\nMemFree: 90000000 kB\nMemAvailable: 100000000 kB\nHugePages_Total:    8192\n"
           "HugePages_Free:     6144\nHugepagesize:       2048 kB\nHugetlb:        16777216 kB\n")


def _tree(root, base="sys/fs/cgroup"):
    """A session under a slice with MemoryHigh=40G (memory.high), 12 GiB used of which 2 GiB page cache."""
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "meminfo").write_text(MEMINFO)
    (root / "proc" / "self" / "cgroup").write_text("0::/user.slice/user-1000.slice/session-3.scope\n")
    slice_ = root / base / "user.slice"
    (slice_ / "user-1000.slice" / "session-3.scope").mkdir(parents=True)
    (root / base / "cgroup.controllers").write_text("cpu io memory pids\n")
    (slice_ / "memory.max").write_text("max\n")
    (slice_ / "memory.high").write_text(f"{40 * GIB}\n")
    (slice_ / "memory.current").write_text(f"{12 * GIB}\n")
    (slice_ / "memory.stat").write_text(f"anon {10 * GIB}\nfile {2 * GIB}\nshmem 0\n")
    return root


def _node_limit():
    """The fleet node probe's reader, loaded as the node runs it (probes/shared on its path)."""
    return probe_module("shared", "probe_memlimit", own_name="probe_memlimit_under_test").limit


def test_checks_host_health_reports_the_huge_pages_and_the_memory_limit_a_fleet_node_reports(tmp_path):
    """`check` said nothing of either: 16 GiB of huge pages and a 40 GiB MemoryHigh were seen only by `fleet check`."""
    root = _tree(tmp_path)
    health = observe(root, live=False)
    assert (health["memory"]["hugetlb_kib"], health["memory"]["hugetlb_free_kib"]) == (16 * 2**20, 12 * 2**20)
    expected = {"bytes": 40 * GIB, "used_bytes": 10 * GIB, "cgroup": "/user.slice"}
    assert health["memory_limit"] == _node_limit()(str(root)) == expected
    # the local memory preflight judges the launch against the same readings, under a host root as a node's probe does
    have = read_have(root, ask_nvml=False)
    assert (have.limit_bytes, have.limit_used_bytes) == (40 * GIB, 10 * GIB)
    assert (have.hugetlb_bytes, have.hugetlb_free_bytes) == (16 * GIB, 12 * GIB)
    assert have.usable_bytes == 40 * GIB - 10 * GIB - 3 * GIB // 2


def test_a_hybrid_hosts_cgroup_v2_is_read_under_unified(tmp_path):
    """systemd's hybrid layout (this project's test machine: /sys/fs/cgroup a tmpfs of v1 hierarchies, cgroup2 on
    /sys/fs/cgroup/unified): the v2 limit was looked for under /sys/fs/cgroup, where it is not, and missed."""
    root = _tree(tmp_path, "sys/fs/cgroup/unified")
    (root / "sys/fs/cgroup/memory").mkdir()  # the v1 memory hierarchy beside it
    assert cgroup_room("self", root) == (40 * GIB, 10 * GIB)
    assert _node_limit()(str(root))["bytes"] == 40 * GIB
    assert observe(root, live=False)["memory_limit"]["cgroup"] == "/user.slice"
