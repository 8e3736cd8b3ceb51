"""A test run interrupted with Ctrl-C must leave nothing of its dockerd or podman: no daemon, containerd, shim, conmon,
container process or mount under the runtime's /tmp/sd-dockerd-* or /tmp/sd-podman-* root, and no root. A teardown cut short (a second Ctrl-C
during it, or xdist killing a worker that did not stop within 10 s of being told to) left the shims, the containers'
processes and the mounts behind; the keeper (tests/keeper.py) now cleans up once the test process
ends, however it ends.

Each case (tests/interrupted.py) runs a real pytest on tests/container/interrupted_session.py (the suite's own
fixtures, its own dockerd on its own root), waits for its readiness line on a FIFO, interrupts it, waits for the
keeper to finish, and looks."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.interrupted import CASES, interrupt, wait_for_exit
from tests.keeper import alive, clean_up

SESSION_TESTS = {"docker": "test_waits_to_be_interrupted", "podman": "test_podman_waits_to_be_interrupted"}
SKIPS = {"docker": "no container runtime can run here", "podman": "podman cannot run here"}


def _cmdline(pid: int | str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _said(cmdline: bytes) -> str:
    return cmdline.replace(b"\0", b" ").decode(errors="replace").strip()


def _leftovers(info: dict[str, object], container_cmd: bytes) -> dict[str, list[str]]:
    root = str(info["root"])
    container = int(str(info["container"]))
    found = {
        "processes": [f"{p.name} {_said(_cmdline(p.name))}" for p in Path("/proc").iterdir()
                      if p.name.isdigit() and alive(int(p.name)) and root.encode() in _cmdline(p.name)],
        "container": [str(container)] if alive(container) and _cmdline(container) == container_cmd else [],
        "mounts": [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                   if line.split()[1] == root or line.split()[1].startswith(root + "/")],
        "root": [root] if os.path.exists(root) else [],
    }
    return {kind: items for kind, items in found.items() if items}


def _sweep(info: dict[str, object], container_cmd: bytes) -> None:
    """What this test's own session left, gone (only its own root's: another run's dockerd is never touched)."""
    for kind, items in _leftovers(info, container_cmd).items():
        if kind in ("processes", "container"):
            for item in items:
                try:
                    os.kill(int(item.split()[0]), signal.SIGKILL)
                except OSError:
                    pass
    clean_up([str(info["root"])], None)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_an_interrupted_run_leaves_no_daemon_shim_container_or_mount(runtime, case, tmp_path):
    up: dict[str, object] = {}
    container_cmd: list[bytes] = []

    def noted(info: dict[str, object]) -> None:
        up.update(info)
        container_cmd.append(_cmdline(int(str(info["container"]))))
        assert container_cmd[0], "the container's process was not found"

    try:
        session = "tests/container/interrupted_session.py::" + SESSION_TESTS[runtime]
        run = interrupt(case, session, tmp_path, SKIPS[runtime], noted)
        if run.info.get("keeper"):
            wait_for_exit(int(str(run.info["keeper"])))
        left = _leftovers(run.info, container_cmd[0])
        assert not left, f"the interrupted run ({case}) left: {left}\n{run.output[-2000:]}"
    finally:
        if up:
            _sweep(up, container_cmd[0] if container_cmd else b"")
