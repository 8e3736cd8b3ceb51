"""What the box has now: /proc/meminfo, the processes holding /dev/nvidia* (their resident memory, from /proc),
NVML where it answers (GB10's N/A recorded, an H100's per-process numbers recorded), containers' memory, and a
real process and a real memory cgroup on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from sparkdoctor.memory.have import GIB, OS_RESERVE, SERVER_PROCESSES, read_have, sample
from tests.memory.hosts import DATA, LEFTOVER, SERVING, busy_gb10, gb10_nvml


def test_meminfo_and_the_processes_holding_the_gpu(tmp_path):
    have = read_have(busy_gb10(tmp_path), nvml=gb10_nvml())
    assert (have.total_bytes, have.free_bytes) == (125_511_680 * 1024, 94_371_840 * 1024)  # MemTotal, MemFree
    assert have.usable_bytes == have.available_bytes - OS_RESERVE - SERVER_PROCESSES  # one pool: the server's processes too
    assert [(h.pid, h.name, h.rss_bytes) for h in have.holders] == [(4242, "python3", 92 * GIB), (6001, "ComfyUI", 18 * GIB)]
    assert have.holders[0].devices == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"]
    assert have.holders[0].container == SERVING[:12] and have.holders[1].container is None
    # GB10: NVML answers, but N/A for memory: recorded as not supported, never a number; /proc is the source
    assert have.nvml.startswith("memory not supported (N/A") and have.unified
    assert all(h.gpu_bytes is None for h in have.holders)
    assert [(h.pid, h.name) for h in have.others] == [(7100, "gnome-shell")]  # sshd is under 100 MiB


def test_containers_and_the_leftover_one(tmp_path):
    have = read_have(busy_gb10(tmp_path), nvml=gb10_nvml())
    by_id = {c.id: c for c in have.containers}
    assert by_id[SERVING[:12]].holds_gpu and not by_id[SERVING[:12]].leftover
    assert by_id[LEFTOVER[:12]].leftover and by_id[LEFTOVER[:12]].bytes == 11 * GIB
    doc = json.loads(json.dumps(have.to_dict()))
    assert [c["leftover"] for c in doc["containers"]] == [False, True]


def test_nvml_with_per_process_memory_recorded_on_an_h100(tmp_path):
    """tests/data/h100/load-nvml-round4.txt: a real H100's NVML reading (pid 576 using 6,242 MiB)."""
    text = (DATA / "h100" / "load-nvml-round4.txt").read_text()
    reading = json.loads(text[: text.rindex("}") + 1])
    gpus = [{**g, "memory_total_mib": 81559, "memory_used_mib": 6242} for g in reading["gpus"]]
    have = read_have(busy_gb10(tmp_path), nvml=gpus)
    assert have.nvml == "answered" and not have.unified
    nvml_only = [h for h in have.holders if h.pid == 576]
    assert nvml_only and nvml_only[0].gpu_bytes == 6242 * 2**20 and nvml_only[0].devices == []
    assert have.pool_bytes == 81559 * 2**20 and have.usable_bytes == (81559 - 6242) * 2**20  # host processes take none of it
    assert have.server_processes_bytes == 0


def test_a_tree_without_meminfo_is_unknown_not_empty(tmp_path):
    (tmp_path / "proc").mkdir()
    have = read_have(tmp_path, nvml=[])
    assert have.total_bytes is None and have.usable_bytes is None and "meminfo" in have.errors[0]


def test_a_real_process_not_on_the_gpu_is_seen_with_its_memory():
    """A real child holding 300 MiB, read from this machine's real /proc."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
                              "print('ready', flush=True); sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout and child.stdout.readline().strip() == "ready"
        have = read_have(Path("/"), ask_nvml=False)
        seen = [h for h in have.others if h.pid == child.pid]
        assert seen and seen[0].rss_bytes is not None and seen[0].rss_bytes >= 300 * 2**20, [h.pid for h in have.others]
        available, rss = sample({child.pid, 2**22 + 7})  # a pid that is not there counts nothing
        assert rss is not None and rss >= 300 * 2**20 and available is not None and available > 0
    finally:
        child.kill()
        child.wait()


def _memory_cgroup() -> Path | None:
    for base in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")):
        if (base / "cgroup.controllers").exists() or (base / "memory.limit_in_bytes").exists():
            return base
    return None


def test_a_real_container_cgroup_that_holds_memory_with_no_gpu_process():
    """A real memory cgroup named as docker names a container's, holding a real process's 200 MiB."""
    base = _memory_cgroup()
    assert base is not None and os.geteuid() == 0, "this test makes a memory cgroup: it needs root and cgroup v1 or v2"
    cid = uuid.uuid4().hex + uuid.uuid4().hex
    folder = base / "docker" / cid if (base / "memory.limit_in_bytes").exists() else base / "system.slice" / f"docker-{cid}.scope"
    folder.mkdir(parents=True)
    child = subprocess.Popen([sys.executable, "-c", "import sys; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
                              "print('ready', flush=True); sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             preexec_fn=lambda: (folder / "cgroup.procs").write_text(str(os.getpid())))
    try:
        assert child.stdout and child.stdout.readline().strip() == "ready"
        have = read_have(Path("/"), ask_nvml=False)
        found = [c for c in have.containers if c.id == cid[:12]]
        assert found and found[0].bytes >= 200 * 2**20 and found[0].pids == [child.pid] and found[0].leftover
    finally:
        child.kill()
        child.wait()
        folder.rmdir()


def test_the_memory_limit_of_the_cgroup_a_launch_would_start_in_bounds_what_is_usable():
    """sparkdoctor (and so the server bench launches) in a real memory cgroup of 512 MiB, on a box with GiBs
    available: the usable memory is the cgroup's room, not MemAvailable (the preflight said "fits" for a launch the
    cgroup's OOM killer then ended), and the finding's evidence says so."""
    from tests.memory.cgroups import limited

    code = ("import json; from pathlib import Path; from sparkdoctor.memory.have import read_have; "
            "h = read_have(Path('/'), ask_nvml=False); "
            "from sparkdoctor.memory.verdict import holdings; "
            "print(json.dumps([h.available_bytes, h.usable_bytes, h.limit_bytes, h.limit_used_bytes, holdings(h)[0].remedy]))")
    with limited(512 * 2**20) as group:
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                               cwd=Path(__file__).resolve().parents[2],
                               preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
    assert child.returncode == 0, child.stderr
    available, usable, limit, used, remedy = json.loads(child.stdout)
    assert available > 2 * GIB and limit == 512 * 2**20 and 0 <= used < limit
    assert usable == max(0, limit - used - SERVER_PROCESSES)  # the server's own processes count in the cgroup too
    assert remedy.startswith("raise the memory limit of the cgroup this runs in")  # what withholds the most comes first


def test_a_meminfo_without_memavailable_says_so(tmp_path):
    """A readable /proc/meminfo without MemAvailable (before Linux 3.14, or garbled) was reported as "no readable
    /proc/meminfo" with no error behind it; the error now names the missing field."""
    for text, missing in (("MemTotal: 1000000 kB\nMemFree: 500000 kB\n", "no MemAvailable"), ("Foo: 1 kB\n", "no MemTotal or MemAvailable")):
        (tmp_path / "proc").mkdir(exist_ok=True)
        (tmp_path / "proc" / "meminfo").write_text(text)
        have = read_have(tmp_path, ask_nvml=False)
        assert have.usable_bytes is None and any(missing in e for e in have.errors), have.errors


def test_a_cgroups_page_cache_is_room_not_use(tmp_path):
    """A container that read a checkpoint has its page cache counted in its usage (memory.current); the kernel
    reclaims it before the cgroup's OOM killer acts, so it is room (the preflight would refuse a launch that fits)."""
    from sparkdoctor.memory.have import cgroup_room

    (tmp_path / "proc" / "77").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: 131072000 kB\nMemAvailable: 100000000 kB\n")
    (tmp_path / "proc" / "77" / "cgroup").write_text("0::/system.slice/docker-abc.scope\n")
    group = tmp_path / "sys" / "fs" / "cgroup" / "system.slice" / "docker-abc.scope"
    group.mkdir(parents=True)
    (group / "memory.max").write_text(f"{64 * GIB}\n")
    (group / "memory.current").write_text(f"{62 * GIB}\n")
    (group / "memory.stat").write_text(f"anon {2 * GIB}\nfile {60 * GIB}\nkernel 1000\n")
    assert cgroup_room(77, tmp_path) == (64 * GIB, 2 * GIB)


def _tree(tmp_path, cgroup_line: str, groups: dict[str, dict[str, str]]):
    (tmp_path / "proc" / "77").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: 131072000 kB\nMemAvailable: 100000000 kB\n")
    (tmp_path / "proc" / "77" / "cgroup").write_text(cgroup_line)
    for rel, files in groups.items():
        folder = tmp_path / "sys" / "fs" / "cgroup" / rel
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)


def test_an_ancestors_limit_binds_when_it_leaves_less_room(tmp_path):
    """A user session under user-1000.slice (systemd MemoryMax=8G on the slice, none on the scope): only the leaf's
    memory.max was read, so the 8 GiB limit was never seen and the preflight judged against the whole box."""
    from sparkdoctor.memory.have import cgroup_room

    _tree(tmp_path, "0::/user.slice/user-1000.slice/session-3.scope\n", {
        "user.slice": {"memory.max": "max\n", "memory.current": f"{20 * GIB}\n"},
        "user.slice/user-1000.slice": {"memory.max": f"{8 * GIB}\n", "memory.current": f"{3 * GIB}\n",
                                       "memory.stat": f"anon {3 * GIB}\nfile 0\n"},
        "user.slice/user-1000.slice/session-3.scope": {"memory.max": "max\n", "memory.current": f"{GIB}\n"}})
    assert cgroup_room(77, tmp_path) == (8 * GIB, 3 * GIB)
    # a leaf limit that leaves less room than its parent's is the one that binds
    (tmp_path / "sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope/memory.max").write_text(f"{2 * GIB}\n")
    assert cgroup_room(77, tmp_path) == (2 * GIB, GIB)


def test_shared_memory_in_a_cgroup_is_not_room(tmp_path):
    """v2's memory.stat `file` counts tmpfs and /dev/shm pages (`shmem`), which the kernel cannot reclaim while their
    files exist: a 16 GiB container with 1 GiB of anonymous memory and 10 GiB in /dev/shm had 13.5 GiB of room; 4."""
    from sparkdoctor.memory.have import cgroup_room

    _tree(tmp_path, "0::/system.slice/docker-abc.scope\n", {"system.slice/docker-abc.scope": {
        "memory.max": f"{16 * GIB}\n", "memory.current": f"{11 * GIB}\n", "memory.stat": f"anon {GIB}\nfile {10 * GIB}\nshmem {10 * GIB}\n"}})
    assert cgroup_room(77, tmp_path) == (16 * GIB, 11 * GIB)


def test_a_real_parent_cgroups_limit_binds_a_process_in_an_unlimited_child():
    """The real kernel's layout: a process in a child cgroup with no limit of its own, under a parent limited to
    512 MiB (a systemd slice's MemoryMax), is bounded by the parent's limit."""
    from sparkdoctor.memory.have import cgroup_room
    from tests.memory.cgroups import limited

    with limited(512 * 2**20) as group:
        inner = group / "unit"
        inner.mkdir()
        sleeper = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: (inner / "cgroup.procs").write_text(str(os.getpid())))
        try:
            limit, used = cgroup_room(sleeper.pid, Path("/"))
        finally:
            sleeper.kill()
            sleeper.wait(timeout=30)
            inner.rmdir()
    assert limit == 512 * 2**20 and used is not None and 0 <= used < limit
