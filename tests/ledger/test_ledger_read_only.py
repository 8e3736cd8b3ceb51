"""Reading a ledger never writes it: `history` and `conclusions` on a ledger of an older schema leave the file
byte for byte as it was (an older sparkdoctor sharing it can still read it), a healthy ledger on storage nobody can
write is read, and writing to one is refused with the reason, not as "unreadable; move it aside". Real SQLite
files and the real CLI; the storage is made read-only the way a mount would be, for a user without root's right to
write everything (the CLI runs as `nobody` when the suite runs as root)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkdoctor.exitcodes import EXIT_LEDGER
from sparkdoctor.ledger import SCHEMA_VERSION, Ledger, unstored
from sparkdoctor.ledger.schema import APPLICATION_ID, MIGRATIONS
from tests.ledger.test_ledger import record
from tests.users import as_bound_user

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: object, as_user: list[str] | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", SPARKDOCTOR_STATE_DIR=os.devnull, SPARKDOCTOR_CACHE_DIR=os.devnull)
    if as_user:  # the other user cannot read root's data folder (the matrix updates rerun looks for)
        env["SPARKDOCTOR_DATA_DIR"] = os.devnull
    return subprocess.run([*(as_user or []), sys.executable, "-m", "sparkdoctor", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def schema_3_ledger(path: Path) -> None:
    """A ledger as the sparkdoctor before schema 4 left it (a rollback journal: it never ran WAL on it)."""
    db = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2, 3):
        MIGRATIONS[version](db)
        db.execute(f"PRAGMA user_version = {version}")
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("INSERT INTO runs (created_at, recipe_name, recipe_hash, recipe_json, base_url, model, server_json, fingerprint,"
               " facts_json, bench_version, tool_version, workload_json, summary_json, findings_json)"
               " VALUES ('2026-01-01', 'old-run', 'h', '{}', 'u', 'm', '{}', 'fp', '{}', 1, '0', '{}', '{\"levels\": []}', '[]')")
    db.close()


def test_reading_an_older_ledger_leaves_it_as_it_was_and_a_write_migrates_it(tmp_path):
    path = tmp_path / "old.sqlite"
    schema_3_ledger(path)
    before = digest(path)
    for args in (("history",), ("history", "1"), ("history", "--format", "json"), ("conclusions",),
                 ("rerun", "--dry-run")):
        p = cli(*args, "--ledger", path)
        assert p.returncode == 0, (args, p.stderr)
    assert "old-run" in cli("history", "--ledger", path).stdout
    assert digest(path) == before, "reading migrated the file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.sqlite"], "reading left -wal/-shm/-journal files"
    with Ledger(path) as led:  # a writer (bench, history --import) migrates it for real
        led.add_run(record())
        assert led.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.fixture
def read_only_folder() -> Iterator[tuple[Path, list[str]]]:
    """A folder and ledger nobody may write, and how to run the CLI as a user the permissions bind: `nobody` when
    the suite runs as root (whose right to write everything a read-only mount would take away), else the user."""
    folder = Path(tempfile.mkdtemp(prefix="sd-ro-"))  # not under pytest's 0700 root: `nobody` must reach it
    as_user = as_bound_user()
    try:
        yield folder, as_user
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def test_a_wal_ledger_on_storage_nobody_can_write_is_read_and_a_write_says_why(read_only_folder):
    folder, as_user = read_only_folder
    path = folder / "ledger.sqlite"
    with Ledger(path) as led:
        led.add_run(record(name="kept-run"))
        led.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    folder.chmod(0o555)
    path.chmod(0o444)
    assert not (folder / "ledger.sqlite-shm").exists()  # closed cleanly: SQLite removed its -wal and -shm
    before = digest(path)
    p = cli("history", "--ledger", path, as_user=as_user)
    assert p.returncode == 0 and "kept-run" in p.stdout, p.stderr
    assert cli("conclusions", "--ledger", path, as_user=as_user).returncode == 0
    state = Path(tempfile.mkdtemp(prefix="sd-state-"))
    try:  # a writer: history --import of a run bench kept, refused with the reason, and the run kept
        os.environ["SPARKDOCTOR_STATE_DIR"], saved = str(state), os.environ.get("SPARKDOCTOR_STATE_DIR")
        try:
            kept = unstored.keep(record(name="late-run"))
        finally:
            os.environ.pop("SPARKDOCTOR_STATE_DIR") if saved is None else os.environ.update(SPARKDOCTOR_STATE_DIR=saved)
        for part in (state, kept.parent):
            part.chmod(0o755)
        kept.chmod(0o644)
        p = cli("history", "--import", kept, "--ledger", path, as_user=as_user)
        assert p.returncode == EXIT_LEDGER and p.stderr.count("\n") == 1, p.stderr
        assert "cannot be written here" in p.stderr and "move it aside" not in p.stderr and f"{kept} is kept" in p.stderr, p.stderr
        assert kept.exists()
    finally:
        shutil.rmtree(state)
    assert digest(path) == before


@pytest.mark.parametrize("device", [os.devnull, "/dev/zero"])
def test_a_device_as_the_ledger_is_named_as_not_a_file(device):
    p = cli("history", "--ledger", device)
    assert p.returncode == EXIT_LEDGER and p.stderr.count("\n") == 1, p.stderr
    assert "not a regular file" in p.stderr and "disk full" not in p.stderr, p.stderr


READERS = (("history",), ("history", "1"), ("history", "--format", "json"), ("conclusions",), ("rerun", "--dry-run"))


def test_reading_a_wal_ledger_leaves_no_wal_or_shm_files_beside_it(tmp_path):
    """A read-only SQLite connection to a WAL file makes its -wal and -shm files and cannot remove them as it closes:
    every reader left two files beside the user's ledger."""
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as led:
        led.add_run(record(name="wal-run"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.sqlite"]  # a writer's last close removes them
    before = digest(path)
    for args in READERS:
        p = cli(*args, "--ledger", path)
        assert p.returncode == 0, (args, p.stderr)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.sqlite"], f"{args} left -wal/-shm files"
    assert digest(path) == before


def test_a_read_only_wal_ledger_in_a_folder_one_may_write_is_read_and_nothing_is_made_beside_it(read_only_folder):
    folder, as_user = read_only_folder
    path = folder / "ledger.sqlite"
    with Ledger(path) as led:
        led.add_run(record(name="kept-run"))
    folder.chmod(0o777)
    path.chmod(0o444)
    before = digest(path)
    for args in READERS:
        p = cli(*args, "--ledger", path, as_user=as_user)
        assert p.returncode == 0, (args, p.stderr)
        assert sorted(p.name for p in folder.iterdir()) == ["ledger.sqlite"], f"{args} left -wal/-shm files"
    assert "kept-run" in cli("history", "--ledger", path, as_user=as_user).stdout
    assert digest(path) == before
