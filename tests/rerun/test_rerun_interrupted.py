"""A rerun stopped by SIGTERM once the first arm of its A/B was measured keeps that arm's run in the ledger (its
comparison marked interrupted, as bench's A/B does). Before, the error said only "interrupted (SIGTERM)": the user
was not told a run was kept, which, or what to do. Now the one line and the JSON error name it. The real CLI, the
real ledger, a real streaming server process (patched_server.py)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from sparkdoctor.ledger import Ledger
from tests.rerun.ledgerdata import add_ab, older
from tests.rerun.test_rerun_fast import REPO, _recipe


def _new_runs(ledger) -> list[tuple[int, str]]:
    db = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute("SELECT id, arm FROM runs WHERE comparison_id > 1 ORDER BY id").fetchall()
    finally:
        db.close()


def test_an_interrupted_rerun_names_the_run_it_kept(tmp_path, here_facts):
    paths = {"A": _recipe(tmp_path, "eager", False), "B": _recipe(tmp_path, "compiled", True)}
    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:  # recorded before a vllm upgrade: stale now, re-runnable
        add_ab(led, paths, older(here_facts, vllm="0.31.0"), {"A": [40.0, 41.0, 40.5], "B": [90.0, 91.0, 92.0]},
               "compile-vs-eager")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "VLLM_SDTEST_PATCH")}
    env.update(PYTHONPATH=str(REPO), COLUMNS="200", SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "sparkdoctor", "rerun", "--ledger", str(ledger), "--format", "json",
                             "--allow-load-difference"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(3000):  # polls, not a time limit: the first arm's run is stored, the second arm not yet
            if _new_runs(ledger) or proc.poll() is not None:
                break
            time.sleep(0.1)
        kept = _new_runs(ledger)
        assert len(kept) == 1 and proc.poll() is None, (kept, proc.poll())
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    (rid, arm), = _new_runs(ledger)  # nothing measured after the signal
    assert proc.returncode == 128 + signal.SIGTERM and err.count("\n") == 1, err
    said = f"kept run {rid} (arm {arm}) of comparison 2, marked interrupted"
    assert said in err and f"`sparkdoctor history {rid}` shows it" in err, err
    assert "conclusion compile-vs-eager was not re-measured: `sparkdoctor rerun compile-vs-eager`" in err, err
    (error,) = json.loads(out)["errors"]
    assert error["exit_code"] == 143 and said in error["message"], error
    with Ledger(ledger) as led:
        assert led.run(rid) is not None
    db = sqlite3.connect(ledger)
    assert db.execute("SELECT status FROM comparisons WHERE id = 2").fetchone() == ("interrupted",)
    db.close()
