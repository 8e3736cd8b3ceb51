"""A reader of a ledger of an older schema copied the whole file into memory (`db.backup` into `:memory:`) on every
read until a writer migrated it: a ledger of hundreds of MB cost that much memory per `history` or `rerun --dry-run`.
Now it is read in place through views of the current schema: memory does not grow with the file, the answers are
those of the migrated file, and the file is left byte for byte as it was. Real SQLite files; memory is the peak
resident size of a child process (VmHWM; no timing)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from sparkdoctor.ledger import Ledger
from tests.ledger.test_ledger_read_only import schema_3_ledger

ROOT = Path(__file__).resolve().parents[2]
BLOB_MB = 48  # samples a run list never reads: in memory only if the file is copied whole

READ = """
import json, sys
from sparkdoctor.ledger import Ledger

def peak_kib():  # this process's own peak (ru_maxrss would carry the parent's across exec)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

before = peak_kib()
led = Ledger(sys.argv[1], read_only=True)
runs = [r["recipe_name"] for r in led.runs()]
run = led.run(1)
answer = {"runs": runs, "memory": run["memory"], "samples": led.db.execute("SELECT count(*) FROM samples").fetchone()[0], "comparison": led.comparison(1),
          "grown_kib": peak_kib() - before}
led.close()
print(json.dumps(answer))
"""


def big_schema_3_ledger(path: Path) -> None:
    schema_3_ledger(path)
    db = sqlite3.connect(path, isolation_level=None)
    sample = json.dumps({"text": "x" * (1 << 20)})
    db.execute("BEGIN")
    db.executemany("INSERT INTO samples (run_id, concurrency, round, idx, sample_json) VALUES (1, 1, 0, ?, ?)",
                   ((i, sample) for i in range(BLOB_MB)))
    db.execute("COMMIT")
    db.close()


def read(path: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_an_older_ledger_is_read_in_place_not_copied_into_memory(tmp_path):
    path = tmp_path / "old.sqlite"
    big_schema_3_ledger(path)
    assert path.stat().st_size > BLOB_MB << 20
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    answer = read(path)
    assert answer["grown_kib"] < (BLOB_MB << 10) // 3, f"reading grew by {answer['grown_kib']} KiB for a {BLOB_MB} MiB file"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before, "reading changed the file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.sqlite"], "reading left -wal/-shm/-journal files"

    migrated = tmp_path / "migrated" / "old.sqlite"  # the same file migrated by a writer answers the same
    migrated.parent.mkdir()
    shutil.copy(path, migrated)
    Ledger(migrated).close()
    again = read(migrated)
    assert {k: v for k, v in answer.items() if k != "grown_kib"} == {k: v for k, v in again.items() if k != "grown_kib"}
    assert answer["runs"] == ["old-run"] and answer["memory"] is None and answer["samples"] == BLOB_MB
