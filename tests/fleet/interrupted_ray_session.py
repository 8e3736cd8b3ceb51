"""The session tests/fleet/test_ray_interrupted.py interrupts (tests/interrupted.py): its test takes the session's Ray
cluster, says where its processes and folders are, and waits to be interrupted."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from tests.interrupted import say, slow_teardown  # noqa: F401 (a fixture)


@pytest.mark.slow
@pytest.mark.usefixtures("slow_teardown")
def test_waits_to_be_interrupted(ray_cluster):
    address, _ = ray_cluster
    folder = os.environ["RAY_TMPDIR"]
    temp_dirs, keeper = set(), None
    for entry in Path("/proc").iterdir():  # the cluster's processes name its GCS address and its temp folder
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if f"--gcs-address={address}" in cmdline:
            temp_dirs.update(re.findall(r"--temp[-_]dir=([^\x00\s]+)", cmdline))
        if "keeper.py" in cmdline and folder in cmdline:  # the fixture's keeper, where it has one
            keeper = int(entry.name)
    say({"address": address, "temp_dirs": sorted(temp_dirs), "ray_tmpdir": folder, "pid": os.getpid(), "keeper": keeper})
    while True:  # until a signal ends it
        signal.pause()
