"""A rollback writes only where the environment it restores really is, and from the journal alone: a folder inside the
venv linked out of it, and a file of a venv's base installation, are refused in one line, exit 4, before anything
changes; a file of another dist edited since a finished apply is left as it is, and no package index is asked for it.
Real targets: the session's applied pip venv (scenario.applied), and a venv of a base installation made here."""

from __future__ import annotations

import glob
import json
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


def test_a_file_of_another_dist_edited_since_the_apply_is_left_and_no_index_is_asked(applied_again):
    python, _env_file, _pins, _before, after, journal = applied_again
    patched = next(python.parent.parent.glob("lib/python*/site-packages/typing_extensions.py"))
    patched.write_text(patched.read_text() + "# a local patch, made after the apply\n")
    res = sd("fix", "--rollback", journal.name, env=UNREACHABLE)
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert f"Changed since the apply, not by it (left as they are): {patched}\n" in res.stdout, res.stdout
    assert patched.read_text().endswith("# a local patch, made after the apply\n"), "left as it is, not fetched again"
    assert jr.load(journal.name).status() == "rolled back"
    body = json.loads(sd("fix", "--rollback", journal.name, "--format", "json").stdout)["result"]
    assert body["status"] == "already rolled back" and body["verified"]["files_changed_since"] == [str(patched)]


def test_a_rollback_that_needs_the_package_index_says_so(applied_again):
    """An apply that stopped part way (its journal marked as a kill leaves it) may have changed a file of another dist:
    only that dist's released wheel, from the package index, has it; the rollback says so, and with no index the file
    is named among the differences."""
    python, _env_file, _pins, _before, _after, journal = applied_again
    (journal / jr.APPLIED).unlink()
    steps = len(json.loads((journal / "journal.json").read_text())["plan"]["steps"])
    (journal / jr.APPLYING).write_text(json.dumps({"step": steps, "of": steps}) + "\n")  # killed in its check after
    damaged = next(python.parent.parent.glob("lib/python*/site-packages/typing_extensions.py"))
    damaged.write_text(damaged.read_text() + "# written by the installer the apply ran\n")
    res = sd("fix", "--rollback", journal.name, env=UNREACHABLE)
    assert res.returncode == 5, (res.returncode, res.stdout, res.stderr)
    assert ("Note: 1 file(s) of dists outside the plan differ from the journal (e.g. "
            f"{damaged}): they are written again from their released wheels, fetched from the package index") in res.stdout
    assert f"DIFFERENCES: {damaged} (outside the plan)" in res.stdout, res.stdout
