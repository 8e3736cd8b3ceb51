"""`-o FILE` or `--html FILE` that is the ledger itself (or its -wal, or a link to it) replaced the user's ledger with
the document: every stored run lost, exit 0. Refused now, one line, exit 2, the ledger byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.exitcodes import EXIT_USAGE
from sparkdoctor.ledger import Ledger
from tests.ledger.test_ledger import record

ROOT = Path(__file__).resolve().parents[2]


def cli(tmp_path: Path, *args: object) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
               SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)


@pytest.mark.parametrize("args", [
    ("history", "-f", "json", "-o", "{ledger}", "--ledger", "{ledger}"),
    ("history", "1", "-f", "json", "-o", "{link}", "--ledger", "{ledger}"),
    ("history", "-o", "{ledger}"),  # the default ledger (the state folder's)
    ("conclusions", "--output", "{ledger}", "--ledger", "{link}"),
    ("rerun", "--dry-run", "-f", "json", "-o", "{ledger}", "--ledger", "{ledger}"),
    ("history", "-f", "json", "-o", "{ledger}-wal", "--ledger", "{ledger}"),
    ("history", "--html", "{ledger}", "--ledger", "{ledger}"),
])
def test_the_document_never_replaces_the_ledger_it_was_read_from(tmp_path, args):
    ledger = tmp_path / "state" / "ledger.sqlite"
    ledger.parent.mkdir()
    with Ledger(ledger) as led:
        led.add_run(record(name="precious"))
    (tmp_path / "link.sqlite").symlink_to(ledger)
    before = hashlib.sha256(ledger.read_bytes()).hexdigest()
    p = cli(tmp_path, *(a.format(ledger=ledger, link=tmp_path / "link.sqlite") for a in args))
    assert p.returncode == EXIT_USAGE and p.stderr.count("\n") == 1 and "the ledger" in p.stderr, p.stderr
    assert hashlib.sha256(ledger.read_bytes()).hexdigest() == before
    assert sorted(x.name for x in ledger.parent.iterdir()) == ["ledger.sqlite"]
    assert json.loads(cli(tmp_path, "history", "--ledger", ledger, "-f", "json").stdout)["runs"][0]["recipe_name"] == "precious"


def test_samples_without_a_run_id_is_refused_not_ignored(tmp_path):
    """`history --samples` lists the ledger without any sample (its help says "With RUN_ID"): a script that asked for
    samples got none and exit 0. Refused now: one line, exit 2; with RUN_ID it is read as before."""
    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:
        led.add_run(record(name="precious"))
    p = cli(tmp_path, "history", "--samples", "--ledger", ledger, "-f", "json")
    assert p.returncode == EXIT_USAGE and p.stderr.count("\n") == 1, (p.stdout[:300], p.stderr)
    assert "--samples" in p.stderr and "RUN_ID" in p.stderr
    assert [e["exit_code"] for e in json.loads(p.stdout)["errors"]] == [EXIT_USAGE]  # the JSON error document, no list
    shown = cli(tmp_path, "history", "1", "--samples", "--ledger", ledger, "-f", "json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["run"]["recipe_name"] == "precious", shown.stderr
