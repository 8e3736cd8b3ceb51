"""A user whose HOME names another user's folders (`sudo -u nobody` keeping HOME=/root) cannot read sparkdoctor's
data, config or state folder there. Each verb that reads them said "internal error: PermissionError ..." (exit 2);
now a verb that reads the matrix uses the bundled one and says why on stderr, `matrix validate` (which judges the
installed one) and `matrix update --rollback` are one line, an unreadable config is one line (its ignores and
fail_on unread would change verdicts), and so is a state folder whose fix journals cannot be listed. The real CLI,
run as `nobody` when the suite runs as root, else with the folder closed to its owner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkdoctor.ledger import Ledger
from tests.users import as_bound_user

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "data" / "facts" / "nogpu-clean.json"
FALLBACK = "the installed matrix is not in use: judged by the bundled (the data folder cannot be read ("


@pytest.fixture
def closed_home(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A HOME whose data and config folders exist and the CLI's user cannot enter, and how to run as that user."""
    home = tmp_path / "home"
    (home / ".local" / "share" / "sparkdoctor" / "matrix").mkdir(parents=True)
    (home / ".config" / "sparkdoctor").mkdir(parents=True)
    as_user = as_bound_user()  # root reads every folder: the CLI runs as nobody then
    home.chmod(0o700 if as_user else 0o000)
    try:
        yield home, as_user
    finally:
        home.chmod(0o700)


def cli(home: Path, as_user: list[str], *args: object, stdin: str = "", state: bool = False) -> subprocess.CompletedProcess[str]:
    """The CLI as that user with that HOME (`state`: its state folder too, else none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARKDOCTOR_", "XDG_"))}
    env.update(HOME=str(home), COLUMNS="200", SPARKDOCTOR_CACHE_DIR=os.devnull)
    if not state:
        env["SPARKDOCTOR_STATE_DIR"] = os.devnull
    return subprocess.run([*as_user, sys.executable, "-m", "sparkdoctor", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env, input=stdin)


@pytest.fixture
def readable() -> Iterator[Path]:
    """A folder any user may read (not under pytest's 0700 folder), with an empty ledger and an empty config."""
    folder = Path(tempfile.mkdtemp(prefix="sd-unread-"))
    try:
        folder.chmod(0o755)
        Ledger(folder / "ledger.sqlite").close()
        (folder / "config.toml").write_text("[check]\n")
        for path in folder.iterdir():
            path.chmod(0o644)
        yield folder
    finally:
        shutil.rmtree(folder)


def test_verbs_that_read_the_matrix_use_the_bundled_one_and_say_why(closed_home, readable):
    home, as_user = closed_home
    runs = {
        "rerun": cli(home, as_user, "rerun", "--dry-run", "--ledger", readable / "ledger.sqlite"),
        "explain": cli(home, as_user, "explain", "-", stdin="nothing known here\n"),
        "matrix list": cli(home, as_user, "matrix", "list"),
    }
    for verb, p in runs.items():
        assert "internal error" not in p.stderr, (verb, p.stderr)
        assert p.returncode in (0, 1), (verb, p.returncode, p.stderr)
        assert FALLBACK in p.stderr and "Permission denied" in p.stderr and p.stderr.count("\n") == 1, (verb, p.stderr)
    p = cli(home, as_user, "matrix", "validate")  # it judges the installed matrix: one line, never the bundled one's pass
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "the data folder cannot be read (" in p.stderr, p.stderr
    p = cli(home, as_user, "matrix", "update", "--rollback")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "cannot roll back the matrix: Permission denied" in p.stderr, p.stderr


def test_an_unreadable_config_folder_is_one_line_and_a_named_config_is_used(closed_home, readable):
    home, as_user = closed_home
    p = cli(home, as_user, "check", "--facts", SNAPSHOT)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "config.toml: cannot be read (Permission denied); name a config with --config" in p.stderr, p.stderr
    p = cli(home, as_user, "check", "--facts", SNAPSHOT, "--config", readable / "config.toml")
    assert p.returncode in (0, 1) and FALLBACK in p.stderr, (p.returncode, p.stderr)


def test_an_unreadable_state_folder_is_one_line_for_fix(closed_home):
    """`fix` lists its journals there (an unfinished fix of the target, --history, --prune): "internal error:
    PermissionError" before; unknown is never read as "no journal"."""
    home, as_user = closed_home
    (home / ".local" / "state" / "sparkdoctor" / "journals").mkdir(parents=True)
    for args in (("fix", "--history"), ("fix", "--prune", "--keep", "1")):
        p = cli(home, as_user, *args, state=True)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, (args, p.stderr)
        assert "cannot read the fix journals (Permission denied); set SPARKDOCTOR_STATE_DIR" in p.stderr, (args, p.stderr)
