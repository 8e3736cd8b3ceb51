"""Host trees for the memory readers: a real-shaped fixture (tests/data/hostroots/) with the /proc entries of
processes that hold /dev/nvidia* open and the cgroups of containers, written as the kernel lays them out."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from sparkdoctor.collect import gpu_health

DATA = Path(__file__).resolve().parent.parent / "data"
LEFTOVER = "3f2a9c1b7d4e" + "0" * 52  # a container whose server died: memory held, no process on the GPU
SERVING = "9b8c7d6e5f4a" + "1" * 52


def gb10_nvml() -> list[dict[str, Any]]:
    """The recorded GB10 health answer, through the same interpretation as a live one."""
    answer = json.loads((DATA / "memory" / "gb10-nvml-health.json").read_text())
    gpus, problem = gpu_health.interpret(answer)
    assert problem is None and gpus is not None
    return gpus


def process(root: Path, pid: int, name: str, rss_kib: int, fds: dict[str, str], cgroup: str = "0::/user.slice\n") -> None:
    folder = root / "proc" / str(pid)
    (folder / "fd").mkdir(parents=True)
    (folder / "status").write_text(f"Name:\t{name}\nState:\tS (sleeping)\nPid:\t{pid}\nVmRSS:\t{rss_kib} kB\n")
    (folder / "cgroup").write_text(cgroup)
    for fd, target in fds.items():
        os.symlink(target, folder / "fd" / fd)


def container(root: Path, cid: str, used: int, pids: list[int]) -> None:
    folder = root / "sys" / "fs" / "cgroup" / "system.slice" / f"docker-{cid}.scope"
    folder.mkdir(parents=True)
    (folder / "memory.current").write_text(f"{used}\n")
    (folder / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))


def busy_gb10(tmp: Path, tree: str = "gb10-healthy") -> Path:
    """gb10-healthy plus: a server (pid 4242, 92 GiB resident) and ComfyUI (pid 6001, 18 GiB) holding the GPU,
    a 6 GiB desktop process not on it, a container that still serves and one whose server died (11 GiB)."""
    root = tmp / tree
    shutil.copytree(DATA / "hostroots" / tree, root, symlinks=True)
    gpu = {"3": "/dev/nvidiactl", "4": "/dev/nvidia0", "5": "/dev/nvidia-uvm", "6": "/tmp/x.log"}
    process(root, 4242, "python3", 92 * 2**20, gpu, f"0::/system.slice/docker-{SERVING}.scope\n")
    process(root, 6001, "ComfyUI", 18 * 2**20, {"9": "/dev/nvidia0"})
    process(root, 7100, "gnome-shell", 6 * 2**20, {"1": "/dev/pts/0"})
    process(root, 7200, "sshd", 8 * 2**10, {"1": "/dev/null"})
    container(root, SERVING, 95 * 2**30, [4242])
    container(root, LEFTOVER, 11 * 2**30, [8800])
    return root
