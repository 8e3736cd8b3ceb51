"""Two `matrix track --apply` runs on one matrix folder (cron, CI and a terminal at once). Real CLI subprocesses; the
test itself holds the folder's lock as a third run would, so the order is fixed by the lock, not by timing."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.released_server import Registry, build_wheel
from tests.test_tracking import RELEASES, write_matrix


@contextmanager
def registry(tmp_path: Path) -> Iterator[dict[str, str]]:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with Registry() as reg:
        for version, body in RELEASES.items():
            reg.add("demo", build_wheel(wheels, "demo", version, {"demo/core.py": body}))
        env = {**os.environ, "SPARKDOCTOR_INDEX_URL": reg.url, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "c")}
        env.pop("SPARKDOCTOR_DEBUG", None)
        yield env


def track(folder: Path, env: dict[str, str], out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sparkdoctor", "matrix", "track", "--matrix", str(folder), "--apply",
                             "--format", "json", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)


def first_waiting_line(proc: subprocess.Popen[str]) -> str:
    """The run's stderr up to its line saying it waits for the lock (or all of it, should it never wait)."""
    assert proc.stderr is not None
    seen = ""
    for line in proc.stderr:
        seen += line
        if "waiting for" in line:
            break
    return seen


def test_two_applies_take_turns_and_neither_loses_the_others_edits(tmp_path):
    """Each run used to read the files, edit and write them with no lock: a run whose read came before the other's
    write wrote its copy over the other's edits (and its undo restored text read before them). Now both wait for
    the folder's holder, said on stderr, write nothing meanwhile, then go one after the other."""
    folder = write_matrix(tmp_path, ">=0.2.0", tracked="0.1.0")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with registry(tmp_path) as env:
        held = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(held, fcntl.LOCK_EX)
        runs = [track(folder, env, tmp_path / f"{name}.json") for name in "ab"]
        try:
            for proc in runs:
                line = first_waiting_line(proc)
                assert f"waiting for pid {os.getpid()} " in line, line
            assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing written under another's lock
        finally:
            os.close(held)
            for proc in runs:
                proc.wait(timeout=120)
    docs = [json.loads((tmp_path / f"{name}.json").read_text()) for name in "ab"]
    applied = sorted(len(d["applied"]) for d in docs)
    assert applied[0] == 0 and applied[1] > 0, docs  # one run made the edits; the other found them made, not redone
    text = (folder / "demo.toml").read_text()
    assert text.count('"demo" = ">=0.2.0,<0.4.0"') == 1, text
    assert 'demo = "0.4.0"' in (folder / "tracking.toml").read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["demo.toml", "tracking.toml"]  # no lock file left in the folder


def test_a_run_that_waits_past_the_bound_says_who_holds_the_folder(tmp_path):
    folder = write_matrix(tmp_path, ">=0.2.0", tracked="0.1.0")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with registry(tmp_path) as env:
        held = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "track", "--matrix", str(folder),
                                   "--apply", "--format", "json"], capture_output=True, text=True, timeout=120,
                                  env={**env, "SPARKDOCTOR_LOCK_WAIT": "0"}, check=False)
        finally:
            os.close(held)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("sparkdoctor: error: --apply: ") and done.stderr.count("\n") == 1, done.stderr
    assert f"is locked by pid {os.getpid()} (" in done.stderr
    assert json.loads(done.stdout)["errors"][0]["code"] == "locked"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
