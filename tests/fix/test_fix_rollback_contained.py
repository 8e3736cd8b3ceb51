"""A rollback writes only where the environment it restores really is, and from the journal alone: a folder inside the
venv linked out of it, and a file of a venv's base installation, are refused in one line, exit 4, before anything
changes; a file of another dist edited since a finished apply is left as it is, and no package index is asked for it.
Real targets: the session's applied pip venv (scenario.applied), and a venv of a base installation made here."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sparkdoctor.fix import journal as jr
from tests.fix import scenario
from tests.fix.test_fix_journal_trust import craft, error
from tests.fix.test_fix_targets import sd

UNREACHABLE = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_RETRIES": "0"}


def test_a_folder_linked_out_of_the_venv_is_refused_before_anything_changes(applied_again, tmp_path):
    python, _env_file, _pins, _before, _after, journal = applied_again
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(str(site / "idna"), outside / "idna")
    (site / "idna").symlink_to(outside / "idna")  # the text of every path of idna's files is still inside the venv
    venv_was, outside_was = scenario.snapshot(python.parent.parent), scenario.snapshot(outside)
    res = sd("fix", "--rollback", journal.name)
    error(res, 4, f"journal {journal.name} names {site}/idna/", f"which is {outside}/idna/", "once its links are followed",
          "nothing was changed")
    assert scenario.snapshot(outside) == outside_was, "nothing was written through the link"
    assert scenario.snapshot(python.parent.parent) == venv_was and jr.load(journal.name).status() == "applied"


def based_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A base installation of this Python at tmp_path/base (its interpreter copied, its standard library linked) and a
    venv of it; (the venv's python, the base folder)."""
    base, lib = tmp_path / "base", f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (base / "bin").mkdir(parents=True)
    shutil.copy2(os.path.realpath(sys.executable), base / "bin" / lib)
    (base / "lib" / lib).parent.mkdir()
    (base / "lib" / lib).symlink_to(Path(sys.base_prefix) / "lib" / lib)
    for shared in glob.glob(f"{sys.base_prefix}/lib/libpython*"):  # an interpreter that finds it by $ORIGIN
        (base / "lib" / Path(shared).name).symlink_to(shared)
    subprocess.run([str(base / "bin" / lib), "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    venv_python = tmp_path / "v" / "bin" / "python"
    got = subprocess.run([str(venv_python), "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert got == str(base), got
    return venv_python, base


def test_a_file_of_a_venvs_base_installation_is_never_written(tmp_path):
    python, base = based_venv(tmp_path)
    victim = base / "victim.txt"
    victim.write_text("mine\n")
    folder = craft(jr.journals_dir() / "20261202-000000-c0ffee", str(python), str(victim))
    error(sd("fix", "--rollback", folder.name), 4, f"names {victim}, in the base installation of the venv {python}",
          "changed since the apply", "nothing was changed")
    assert victim.read_text() == "mine\n" and oct(victim.stat().st_mode & 0o7777) == "0o644"
    # named, but left as it is (as the dists a --system-site-packages venv reads there): the rollback goes on
    victim.write_text("written by a crafted journal\n")
    res = sd("fix", "--rollback", folder.name)
    assert res.returncode == 0 and oct(victim.stat().st_mode & 0o7777) == "0o644", (res.stdout, res.stderr)

