"""A test run interrupted with Ctrl-C must leave nothing of its Ray cluster: no GCS, raylet, agent or worker process,
none of its temp folders, and no /tmp/ray (shared/research/ray-local-cluster.md). Each case (tests/interrupted.py)
runs a real pytest on tests/fleet/interrupted_ray_session.py (the session's own three-node cluster on 127.0.0.1),
interrupts it once the cluster is up, waits for the fixture's keeper to finish, and looks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.fleet.conftest import _session_processes, _stop_all
from tests.interrupted import CASES, interrupt, wait_for_exit

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fleet-ray")]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return ""


def _leftovers(info: dict[str, object], seen: dict[int, str], had_tmp_ray: bool) -> dict[str, list[str]]:
    markers = [str(d) for d in info["temp_dirs"]]  # type: ignore[attr-defined]
    found = {
        "processes": sorted({f"{pid} {_cmdline(pid)}" for marker in markers for pid in _session_processes(marker, seen)}),
        "folders": [d for d in [*markers, str(info["ray_tmpdir"])] if os.path.exists(d)],
        "/tmp/ray": ["/tmp/ray"] if os.path.exists("/tmp/ray") and not had_tmp_ray else [],
    }
    return {kind: items for kind, items in found.items() if items}


@pytest.mark.parametrize("case", CASES)
def test_an_interrupted_run_leaves_no_ray_process_or_folder(case, tmp_path):
    pytest.importorskip("ray", reason="ray is a test dependency (pyproject [test]); install '.[test]'")
    had_tmp_ray = os.path.exists("/tmp/ray")
    up: dict[str, object] = {}
    seen: dict[int, str] = {}

    def noted(info: dict[str, object]) -> None:
        up.update(info)
        assert info["temp_dirs"], f"no process of the cluster at {info['address']} was found"
        for marker in info["temp_dirs"]:  # type: ignore[attr-defined]
            seen.update(_session_processes(str(marker)))  # with the workers, while their raylets are their parents

    try:
        run = interrupt(case, "tests/fleet/interrupted_ray_session.py", tmp_path, "ray is a test dependency", noted)
        if run.info.get("keeper"):
            wait_for_exit(int(str(run.info["keeper"])))
        left = _leftovers(run.info, seen, had_tmp_ray)
        assert not left, f"the interrupted run ({case}) left: {left}\n{run.output[-2000:]}"
    finally:
        for marker in up.get("temp_dirs") or []:  # type: ignore[attr-defined]
            _stop_all(str(marker), seen)
            shutil.rmtree(str(marker), ignore_errors=True)
        if up.get("ray_tmpdir"):
            shutil.rmtree(Path(str(up["ray_tmpdir"])), ignore_errors=True)
