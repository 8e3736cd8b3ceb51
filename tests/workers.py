"""How the suite shares the CPU cores: pytest-xdist workers, one per core and one more (pyproject: `-n auto --dist
loadgroup`; tests/conftest.py: pytest_xdist_auto_num_workers).

- Groups. A session fixture is made once per WORKER, so the tests sharing an expensive one run on one worker: one
  dockerd and one podman per session, and one real server at a time (two servers never compete for the two
  cores). A module whose last test checks the whole module's tally (the fuzz total, the fix
  fault table) pins itself with `pytestmark = pytest.mark.xdist_group(...)`.
- Turns. A test marked `alone` compares real timings (an A/B verdict, a stream's token stamps): it waits until the tests
  running on the other workers have finished and holds the others off until it is done, so no other test's CPU
  load lands in its numbers. A turn not had in TURN_WAIT_S (20 minutes; every test ends in minutes) is given up and
  said at the end of the run: one test that never ends stalls its own worker, not all of them.
- Summary lines. A worker's own terminal output is dropped; lines meant for the end of the run (the fuzz tally)
  travel to the controller with the worker's output.
- Where a stopped run was. A CI job cancelled at its time limit (SIGTERM) used to end with nothing but pytest's
  KeyboardInterrupt: each worker notes the test it is in, and the controller, when told to stop, names every worker's
  test, how long it had run, and where in it the worker was (its Python stack, from faulthandler).
"""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import os
import signal
import time
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


def alone_last(items: list[pytest.Item]) -> None:
    """Move the `alone` tests after all the others (a stable sort: each group's and module's order is kept). An alone
    test waits until the tests running on the other workers end, and they start nothing new meanwhile. xdist hands
    out the biggest groups first, so an alone test at the head of its group (the transformers-serve tests of
    real-servers) waited behind the fix fault table's 60-160 s tests while a third worker sat at the gate: 150 s of
    its own and 170 s of the third worker's time in run 29 (docs/evidence/st-rest-2026-11-30.md). Last, an alone test
    meets the short tests at the end of a group or of the run."""
    items.sort(key=lambda item: item.get_closest_marker("alone") is not None)


@contextlib.contextmanager
def turn(config: pytest.Config, nodeid: str, alone: bool) -> Iterator[None]:
    """A test's turn to run on an xdist worker: shared with the other workers' tests, or alone. Without xdist
    there is nobody to wait for. While it waits and runs, the worker's note names it (see `where_they_were`)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        yield
        return
    common = config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]  # <run>/popen-gwN -> <run>
    note = common / f"running-{worker}.txt"
    note.write_text(f"{os.getpid()}\t{time.time()}\t{nodeid}")
    try:
        with hold(common, alone) as had:
            if not had:
                others = [_test_of(n) for n in common.glob("running-*.txt") if n != note]
                summary_line(config, f"{nodeid} ran without its turn after {TURN_WAIT_S:,.0f} s: the other workers were "
                                     f"in {', '.join(others) or 'nothing'}")
            yield
    finally:
        if not _STOPPING:  # a worker stopped by SIGTERM keeps its note: the controller, stopped at once, reads it
            note.unlink(missing_ok=True)


def _test_of(note: Path) -> str:
    """The test a worker's note names ("" if that worker just finished it and took the note away)."""
    try:
        return note.read_text().split("\t", 2)[-1]
    except OSError:
        return ""


_STACKS: list = []  # (a worker) the open file its stacks are written to
_STOPPING: list = []  # (a worker) not empty once it was told to stop: its test's note stays for the controller


def stacks_on_request(config: pytest.Config) -> None:
    """(a worker) Write this process's Python stacks to <run>/stacks-<worker>.txt on SIGUSR1."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        common = config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
        _STACKS.append(open(common / f"stacks-{worker}.txt", "w"))  # noqa: SIM115  # open while the worker lives
        faulthandler.register(signal.SIGUSR1, file=_STACKS[0], all_threads=True)


def where_they_were(run: Path) -> list[str]:
    """One line per worker still in a test: which, for how long, and the innermost frames of the thread running it.
    The controller asks each worker for its stacks (SIGUSR1) and waits a second for them; a worker (told to stop
    itself, as when a whole process group gets SIGTERM) writes its own first."""
    own = os.environ.get("PYTEST_XDIST_WORKER")
    notes = []
    for note in sorted(run.glob(f"running-{own or '*'}.txt")):
        with contextlib.suppress(OSError, ValueError):
            pid, start, nodeid = note.read_text().split("\t", 2)
            notes.append((note.stem.removeprefix("running-"), float(start), nodeid))
            if own and _STACKS:
                _STOPPING.append(True)
                faulthandler.dump_traceback(file=_STACKS[0], all_threads=True)
                # the controller, stopped by the same signal, asks too: by then this worker is unwinding (CI,
                # 2026-12-01: its later dump named pytest's capture teardown instead of the test), so it answers no more
                faulthandler.unregister(signal.SIGUSR1)
                signal.signal(signal.SIGUSR1, signal.SIG_IGN)
            elif not own:
                os.kill(int(pid), signal.SIGUSR1)
    if notes and not own:
        time.sleep(1)
    lines = []
    for worker, start, nodeid in notes:
        frames = _main_frames(run / f"stacks-{worker}.txt")
        lines.append(f"{worker} stopped in {nodeid} after {time.time() - start:,.0f} s; innermost: {' <- '.join(frames[:6])}")
    return lines


def _main_frames(stacks: Path) -> list[str]:
    """The frames (most recent first) of the thread that runs the test (the one in pytest's runner), from a
    faulthandler dump; the signal may land on any thread, execnet's among them."""
    try:
        text = stacks.read_text(errors="replace")
    except OSError:
        return ["(no stack)"]
    threads = [[x.strip().removeprefix("File ") for x in block.splitlines() if x.strip().startswith("File ")]
               for block in text.split("\n\n")]
    runner = [frames for frames in threads if any("_pytest/runner.py" in f for f in frames)]
    return (runner or threads or [[]])[-1] or ["(no stack)"]


TURN_WAIT_S = 1200.0  # the most a test waits for its turn; every test so far ends in minutes, even at load 4


@contextlib.contextmanager
def hold(folder: Path, alone: bool, wait: float = TURN_WAIT_S) -> Iterator[bool]:
    """Two flock files in a folder all workers share: `running` (shared by ordinary tests, exclusive for an alone
    one) and `gate`, which an alone test holds while it waits, so new tests queue behind it instead of starving it.
    Yields whether the turn was had: after `wait` seconds the test runs without it, so one test that never ends
    (holding `running`, or waiting alone at the gate) stalls its own worker, never every worker."""
    with open(folder / "turns-gate.lock", "a") as gate, open(folder / "turns-running.lock", "a") as running:
        until = time.monotonic() + wait
        had = False
        if _flock_by(gate, fcntl.LOCK_EX, until):
            try:
                had = _flock_by(running, fcntl.LOCK_EX if alone else fcntl.LOCK_SH, until)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield had
        finally:
            if had:
                fcntl.flock(running, fcntl.LOCK_UN)


def _flock_by(file, operation: int, until: float) -> bool:
    """flock(operation) if it can be had before `until` (time.monotonic()); polled, so the wait has an end."""
    while True:
        try:
            fcntl.flock(file, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= until:
                return False
            time.sleep(0.2)


def summary_line(config: pytest.Config, text: str) -> None:
    """Print text at the end of the run, from a worker or from a run without workers."""
    if hasattr(config, "workeroutput"):  # on an xdist worker: sent to the controller when the worker finishes
        config.workeroutput.setdefault("summary_lines", []).append(text)
    else:
        config.stash.setdefault(SUMMARY, []).append(text)
