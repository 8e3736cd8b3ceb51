"""The ledger a bench stores in is judged before anything is launched or measured, and made only once a run was
measured (docs/evidence/benchdt-2026-12-02.md): an A/B whose first arm fails left a ledger holding one comparison
marked `interrupted` and no runs; a ledger in a folder that cannot be written was found out after the measuring,
the run then kept in a file. Real recipes launch the stand-in server (tests/bench/sse_server.py) through the CLI;
storage that cannot be written is a file in the way (for anyone) and a read-only folder for a user the permissions
bind (the CLI runs as `nobody` when the suite runs as root, as tests/ledger/test_ledger_read_only.py does)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkdoctor.exitcodes import EXIT_BENCH_FAILED, EXIT_LEDGER
from tests.bench.test_bench_recipe import QUICK, REPO, recipe
from tests.users import as_bound_user


def bench(tmp_path: Path, *args: object, as_user: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
               SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="160")
    if as_user:  # the other user cannot read root's data folder
        env["SPARKDOCTOR_DATA_DIR"] = os.devnull
    return subprocess.run([*(as_user or []), sys.executable, "-m", "sparkdoctor", "bench", *map(str, args), *QUICK],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def comparisons(path: Path) -> list[tuple[str, int]]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT c.status, (SELECT count(*) FROM runs r WHERE r.comparison_id = c.id) FROM comparisons c"
                          " ORDER BY c.id").fetchall()
    finally:
        db.close()


def test_an_ab_whose_first_arm_fails_creates_no_ledger(tmp_path):
    broken = recipe(tmp_path, "broken", "--no-such-flag")  # the stand-in refuses it and exits before it is ready
    good = recipe(tmp_path, "good", "--delay", "0.002")
    ledger = tmp_path / "l.sqlite"
    out = bench(tmp_path, broken, "--vs", good, "--pairs", "1", "--ledger", ledger)
    assert out.returncode == EXIT_BENCH_FAILED and "unrecognized arguments: --no-such-flag" in out.stderr, out.stderr
    assert not ledger.exists() and not list(tmp_path.glob("l.sqlite*")), "nothing measured, yet a ledger was made"

    # a ledger that is there gets no empty comparison either; a second arm failing after a measured first one still
    # stores that run, in a comparison marked interrupted
    assert bench(tmp_path, good, "--ledger", ledger).returncode == 0
    assert bench(tmp_path, broken, "--vs", good, "--pairs", "1", "--ledger", ledger).returncode == EXIT_BENCH_FAILED
    assert comparisons(ledger) == []
    out = bench(tmp_path, good, "--vs", broken, "--pairs", "1", "--ledger", ledger)
    assert out.returncode == EXIT_BENCH_FAILED, out.stderr
    assert comparisons(ledger) == [("interrupted", 1)]


@pytest.mark.parametrize("form", ["recipe", "ab", "url"])
def test_a_ledger_behind_a_file_is_refused_before_anything_is_launched(tmp_path, form):
    (tmp_path / "afile").write_text("a file where the ledger's folder should be\n")
    ledger = tmp_path / "afile" / "l.sqlite"
    good = recipe(tmp_path, "good", "--delay", "0.002")
    args = {"recipe": [good], "ab": [good, "--vs", good, "--pairs", "1"], "url": ["--url", "http://127.0.0.1:9"]}[form]
    out = bench(tmp_path, *args, "--ledger", ledger, "--format", "json")
    assert out.returncode == EXIT_LEDGER, out.stderr
    assert out.stderr.count("\n") == 1 and f"ledger {ledger}: " in out.stderr, out.stderr
    assert "is not a folder" in out.stderr and "nothing was launched or measured" in out.stderr, out.stderr
    assert json.loads(out.stdout)["errors"][0]["type"] == "StoreFailed"
    assert not (tmp_path / "state" / "runs").exists() and not (tmp_path / "state" / "unstored-runs").exists()


@pytest.fixture
def shared_folder() -> Iterator[tuple[Path, list[str]]]:
    """A folder another user reaches (not under pytest's 0700 root) and how to run the CLI as a user the permissions
    bind: `nobody` when the suite runs as root, else the user."""
    folder = Path(tempfile.mkdtemp(prefix="sd-bench-ro-"))
    folder.chmod(0o755)
    as_user = as_bound_user()
    try:
        yield folder, as_user
    finally:
        for part in folder.rglob("*"):
            if part.is_dir():
                part.chmod(0o755)
        shutil.rmtree(folder)


@pytest.mark.parametrize("there", [False, True], ids=["new-ledger", "existing-ledger"])
@pytest.mark.parametrize("ab", [False, True], ids=["run", "ab"])
def test_a_ledger_in_a_read_only_folder_is_refused_before_anything_is_launched(shared_folder, there, ab):
    root, as_user = shared_folder
    work = root / "work"
    work.mkdir(mode=0o777)
    work.chmod(0o777)  # the state folder (run folders) and the recipe: the user may write them
    good = recipe(work, "good", "--delay", "0.002")
    store = root / "store"
    store.mkdir()
    ledger = store / "l.sqlite"
    if there:
        assert bench(work, good, "--ledger", ledger).returncode == 0  # a ledger with one run, made by its owner
        ledger.chmod(0o444)
    store.chmod(0o555)
    args = [good, "--vs", good, "--pairs", "1"] if ab else [good]
    out = bench(work, *args, "--ledger", ledger, as_user=as_user)
    assert out.returncode == EXIT_LEDGER, out.stderr
    assert out.stderr.count("\n") == 1 and "cannot be written" in out.stderr, out.stderr
    assert "nothing was launched or measured" in out.stderr, out.stderr
    runs = work / "state" / "runs"
    assert len(list(runs.iterdir()) if runs.exists() else []) == (1 if there else 0)  # the owner's run only
    assert not (work / "state" / "unstored-runs").exists()


def test_an_ab_whose_second_arm_fails_names_the_run_it_kept(tmp_path):
    """A second arm that fails (no signal: the server exits before it is ready) keeps the first arm's run in a
    comparison marked interrupted, as an interrupted A/B does; the error names that run as an interrupted A/B's does
    (before, it named only the failed arm, and the kept run went unmentioned)."""
    good = recipe(tmp_path, "good", "--delay", "0.002")
    broken = recipe(tmp_path, "broken", "--no-such-flag")
    ledger = tmp_path / "l.sqlite"
    out = bench(tmp_path, good, "--vs", broken, "--pairs", "1", "--ledger", ledger, "--format", "json")
    assert out.returncode == EXIT_BENCH_FAILED and out.stderr.count("\n") == 1, out.stderr
    assert comparisons(ledger) == [("interrupted", 1)]
    said = "kept run 1 (arm A) of comparison 1, marked interrupted; no verdict or conclusion uses it"
    assert "unrecognized arguments: --no-such-flag" in out.stderr and said in out.stderr, out.stderr
    assert "`sparkdoctor history 1` shows it" in out.stderr, out.stderr
    (error,) = json.loads(out.stdout)["errors"]
    assert error["type"] == "RunFailed" and said in error["message"] and error["findings"], error
