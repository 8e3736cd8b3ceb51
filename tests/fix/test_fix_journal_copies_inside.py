"""The journal copies every file of every dist an apply touches, as the dist's RECORD lists it. A RECORD row
`../../../../../home/u/.ssh/id_rsa`, or a module of the venv linked to such a file, made `fix --yes` copy the key
into the journal (mode 0644, in a 0755 folder of the state folder: any local user could read it), and only then
refuse the apply ("a rollback writes only inside the environment it restores") and keep the journal. Now the paths
are judged before anything is copied: one line, exit 6, no journal left, the target as it was; and a journal's
folder is this user's alone (0700), whatever mode a copied file had. And copies that cannot fit in the journals
folder's disk are refused before the first is made, not written until that disk is full.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import UnchangedError
from sparkdoctor.targets.files import LocalFiles
from tests.fix import scenario
from tests.fix.scenario import fix_cli

KEY = b"-----BEGIN OPENSSH PRIVATE KEY----- not a real one\n"


def _home_key(tmp_path: Path) -> Path:
    key = tmp_path / "home" / ".ssh" / "id_rsa"
    key.parent.mkdir(parents=True)
    key.write_bytes(KEY)
    key.chmod(0o600)
    return key


def _site(python: Path) -> Path:
    return next(python.parent.parent.glob("lib/python*/site-packages"))


def _nothing_copied(state: Path) -> None:
    assert scenario.journals(state) == [], "a refused apply leaves no journal"
    for root, _dirs, files in os.walk(state):
        for name in files:
            assert KEY not in (Path(root) / name).read_bytes(), f"the key was copied to {root}/{name}"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["record-row", "linked-module"])
def test_a_file_outside_the_target_is_refused_before_the_journal_copies_it(tmp_path, wheels, how):
    python = scenario.make_target(tmp_path / "t", "pip", wheels)
    key = _home_key(tmp_path)
    site = _site(python)
    if how == "record-row":  # six's RECORD names the key (hash and size right, as pip would have written them)
        digest = base64.urlsafe_b64encode(hashlib.sha256(KEY).digest()).rstrip(b"=").decode()
        with open(site / "six-1.16.0.dist-info" / "RECORD", "a") as fh:
            fh.write(f"{os.path.relpath(key, site)},sha256={digest},{len(KEY)}\n")
    else:  # six.py is a link to the key
        (site / "six.py").unlink()
        (site / "six.py").symlink_to(key)
    state = Path(os.environ["SPARKDOCTOR_STATE_DIR"])
    res = fix_cli(python, "--yes", env={"HOME": str(tmp_path / "home")})
    assert res.returncode == 6, res.stdout + res.stderr
    error = [line for line in res.stderr.splitlines() if line.startswith("sparkdoctor: error: ")]
    assert len(error) == 1 and str(key) in error[0] and "nothing was changed" in error[0], res.stderr
    _nothing_copied(state)
    assert (site / "six-1.16.0.dist-info").is_dir() and key.read_bytes() == KEY
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_journal_folder_is_the_users_alone(tmp_path):
    secret = tmp_path / "private.py"
    secret.write_bytes(KEY)
    secret.chmod(0o600)
    journal = jr.create({}, [], {"x": [str(secret)]}, lambda folder: {}, lambda name: None,
                        {"target": LocalFiles(), "host": LocalFiles()})
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o700
    (row,) = journal.data["dist_files"]["x"]
    assert row["mode"] == 0o600  # the mode the rollback gives back is the file's own, kept in the journal


def test_copies_that_do_not_fit_are_refused_before_any_is_made(tmp_path):
    """A touched dist's RECORD listing a sparse file larger than the journals folder's disk has free: the journal copied
    it out in full (a copy is not sparse) until that disk was full, then stopped ("No space left on device"). Measured
    on a 16 MiB tmpfs with a 2 GiB sparse file (docs/evidence/attack14-2026-12-03.md); here the file is only stat'ed."""
    from sparkdoctor.fix import apply

    state = Path(os.environ["SPARKDOCTOR_STATE_DIR"])
    sparse, small = tmp_path / "blob.bin", tmp_path / "small.py"
    with open(sparse, "wb") as fh:
        fh.truncate(shutil.disk_usage(state).free + (1 << 30))
    small.write_text("x = 1\n")
    apply._room_for(LocalFiles(), [str(small)])  # what fits is let through
    with pytest.raises(UnchangedError, match=r"need [0-9,]+ bytes and .* free: .*nothing was changed"):
        apply._room_for(LocalFiles(), [str(small), str(sparse)])
    assert not (state / "journals").exists() or not any((state / "journals").iterdir())
