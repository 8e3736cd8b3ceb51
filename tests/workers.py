"""How the suite shares the CPU cores: pytest-xdist workers, one per core and one more (pyproject: `-n auto --dist
loadgroup`; tests/conftest.py: pytest_xdist_auto_num_workers).

- Groups. A session fixture is made once per WORKER, so the tests sharing an expensive one run on one worker: one
  dockerd and one podman per session, and one real server at a time (two servers never compete for the two
  cores). A module whose last test checks the whole module's tally (the fuzz total, the fix
  fault table) pins itself with `pytestmark = pytest.mark.xdist_group(...)`.
- Turns. A test marked `alone` compares real timings (an A/B verdict, a stream's token stamps): it waits until the tests
  running on the other workers have finished and holds the others off until it is done, so no other test's CPU
  load lands in its numbers.
- Summary lines. A worker's own terminal output is dropped; lines meant for the end of the run (the fuzz tally)
  travel to the controller with the worker's output.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURE_GROUPS = {
    "docker_daemon": "containers",
    "podman": "containers",
    "vllm_cpu": "real-servers",
    "vllm_cpu_models": "real-servers",
    "transformers_serve": "real-servers",
}
FOLDER_GROUPS = {"container": "containers"}  # tests/container/*: some start their own daemon beside the session's

SUMMARY = pytest.StashKey[list]()


def group_of(item: pytest.Item) -> str | None:
    """The worker group of a collected test, from the fixtures it uses and its folder; None if it has none."""
    groups = {FIXTURE_GROUPS[name] for name in getattr(item, "fixturenames", ()) if name in FIXTURE_GROUPS}
    folder = Path(str(item.path)).parent.name
    if folder in FOLDER_GROUPS:
        groups.add(FOLDER_GROUPS[folder])
    if len(groups) > 1:
        raise pytest.UsageError(f"{item.nodeid} needs fixtures of two worker groups: {', '.join(sorted(groups))}")
    return groups.pop() if groups else None


def lost_group(item: pytest.Item) -> str | None:
    """Why a grouped test would run without its group, or None. xdist groups a test by adding @GROUP to its node id;
    pytest 9.2 made node ids structured and xdist 3.8's suffix silently stopped taking effect (pytest-xdist#1386)."""
    if os.environ.get("PYTEST_XDIST_WORKER") and item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
        return (f"pytest-xdist did not keep {item.nodeid} in its group (pytest-xdist#1386 with pytest>=9.2): "
                "install the test extra, which pins pytest below 9.2")
    return None


@contextlib.contextmanager
def turn(config: pytest.Config, alone: bool) -> Iterator[None]:
    """A test's turn to run on an xdist worker: shared with the other workers' tests, or alone. Without xdist
    there is nobody to wait for."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    common = config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]  # <run>/popen-gwN -> <run>
    with hold(common, alone):
        yield


@contextlib.contextmanager
def hold(folder: Path, alone: bool) -> Iterator[None]:
    """Two flock files in a folder all workers share: `running` (shared by ordinary tests, exclusive for an alone
    one) and `gate`, which an alone test holds while it waits, so new tests queue behind it instead of starving it."""
    with open(folder / "turns-gate.lock", "a") as gate, open(folder / "turns-running.lock", "a") as running:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(running, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(running, fcntl.LOCK_UN)


def summary_line(config: pytest.Config, text: str) -> None:
    """Print text at the end of the run, from a worker or from a run without workers."""
    if hasattr(config, "workeroutput"):  # on an xdist worker: sent to the controller when the worker finishes
        config.workeroutput.setdefault("summary_lines", []).append(text)
    else:
        config.stash.setdefault(SUMMARY, []).append(text)
