"""`fix --rollback --dry-run`: every check a rollback makes before it changes anything, then what it would restore;
the target and the journal are left as they are."""

from __future__ import annotations

import json

from tests.fix.scenario import ENV_TEXT
from tests.fix.test_fix_refusals_first import SMALL, bare_venv, error, sd


def test_a_rollback_dry_run_says_what_it_would_restore_and_changes_nothing(tmp_path):
    python = bare_venv(tmp_path)
    env_file = tmp_path / "vllm.env"
    env_file.write_text(ENV_TEXT)
    applied = sd("fix", "--python", str(python), *SMALL, "--env-file", str(env_file), "--yes", "--format", "json")
    assert applied.returncode == 0, applied.stderr
    ident, edited = json.loads(applied.stdout)["journal"], env_file.read_text()
    assert edited != ENV_TEXT

    p = sd("fix", "--rollback", ident, "--dry-run", "--format", "json")
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)["result"]
    assert result["status"] == "would roll back" and result["dry_run"] is True and result["journal"] == ident
    assert result["restored_files"] == [str(env_file)] and result["restored_packages"] == {}
    assert result["restore_from"] is None  # no dist to reinstall: neither wheels nor copies
    assert [(r["op"], r["path"]) for r in result["reverse"]] == [("edit", str(env_file))]
    assert "nothing was changed" in result["message"]
    assert p.stderr == (f"sparkdoctor fix: checking that journal {ident} of {python} can restore it (a dry run: nothing "
                        "is changed) ...\n"), p.stderr
    console = sd("fix", "--rollback", ident, "--dry-run")
    assert console.returncode == 0 and f"  would restore {env_file}" in console.stdout.splitlines(), console.stdout
    # nothing changed: the file as the apply left it, the journal still applied, and the real rollback still works
    assert env_file.read_text() == edited
    rows = json.loads(sd("fix", "--history", "--format", "json").stdout)["result"]
    assert [r["status"] for r in rows if r["journal"] == ident] == ["applied"]
    back = sd("fix", "--rollback", ident)
    assert back.returncode == 0 and env_file.read_text() == ENV_TEXT, back.stderr


def test_dry_run_goes_with_rollback_only():
    error(sd("fix", "--dry-run"), 2, "--dry-run goes with --rollback")
