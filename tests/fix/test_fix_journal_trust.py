"""A rollback writes only what this machine's own fix recorded, and only inside the target it restores: a journal
from elsewhere (another machine, a bug report, crafted), a journal that names a file outside its target, or one with
a link among its files is refused in one line, exit 4, before its target is started or anything is written. No
index: the target is a venv without pip, the journals are written by hand as a crafted one would be."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import ActionKind, StepKind
from sparkdoctor.fix.model import Plan, Step
from tests.fix.test_fix_targets import error as one_error
from tests.fix.test_fix_targets import sd


def error(p: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    """One error line (a progress line before it aside), naming each needle."""
    shown = "".join(ln + "\n" for ln in p.stderr.splitlines() if not ln.startswith("sparkdoctor fix: "))
    one_error(subprocess.CompletedProcess(p.args, p.returncode, p.stdout, shown), code, *needles)


def bare_venv(tmp_path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    return tmp_path / "v" / "bin" / "python"


def craft(folder: Path, python: str, path: str, copy: str = "copies/dists/0") -> Path:
    """A structurally valid, applied journal whose one package step makes a rollback write `path` from its copy."""
    (folder / "copies" / "dists").mkdir(parents=True)
    (folder / "wheels").mkdir()
    if copy == "copies/dists/0":
        (folder / copy).write_text("written by a crafted journal\n")
    plan = Plan(target={"python": python}, installer="pip",
                steps=[Step(op=StepKind.uninstall, fix="x", why=[], kind=ActionKind.uninstall, names=[])]).to_dict()
    data = {"journal_version": 2, "id": folder.name, "created": "2026-11-23T00:00:00Z", "installer": "pip",
            "target": {"kind": "python", "python": python}, "plan": plan, "packages_before": [], "touched_before": {},
            "hashes_before": {}, "files": [], "dist_files": {"x": [{"path": path, "copy": copy, "mode": 0o4755}]},
            "wheels": {}, "wheel_files": {}, "outside": None}
    body = (json.dumps(data, indent=1) + "\n").encode()
    (folder / "journal.json").write_bytes(body)
    (folder / jr.COMPLETE).write_text(hashlib.sha256(body).hexdigest() + "\n")
    (folder / jr.APPLIED).write_text("{}\n")
    return folder


def test_a_journal_from_outside_the_journals_folder_is_refused_before_its_target_runs(tmp_path):
    python = bare_venv(tmp_path)
    victim = tmp_path / "home" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("mine\n")
    ran = tmp_path / "ran"
    named = tmp_path / "python-of-the-journal"  # the interpreter a crafted journal names: any program
    named.write_text(f"#!/bin/sh\ntouch {ran}\nexec {python} \"$@\"\n")
    named.chmod(0o755)
    foreign = craft(tmp_path / "bug-report" / "20261201-000000-c0ffee", str(named), str(victim))
    res = sd("fix", "--rollback", str(foreign))
    error(res, 4, f"{foreign} is not in this machine's journals folder {jr.journals_dir()}", "nothing was done from it")
    assert victim.read_text() == "mine\n" and not ran.exists(), "refused before the journal's interpreter ran"
    body = json.loads(sd("fix", "--rollback", str(foreign), "--format", "json").stdout)
    assert body["exit_code"] == 4 and "journals folder" in body["errors"][0]["message"]
    # moved into the journals folder (the user's own act), it is read; a half-written one outside changes nothing
    moved = jr.journals_dir() / foreign.name
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(foreign), moved)
    error(sd("fix", "--rollback", foreign.name), 4, f"names {victim}, outside the target", "nothing was changed")
    assert victim.read_text() == "mine\n" and jr.load(foreign.name).status() == "applied"


def test_a_journal_naming_a_file_outside_its_target_is_refused(tmp_path):
    python = bare_venv(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    jr.journals_dir().mkdir(parents=True, exist_ok=True)
    for path in (str(victim), f"{tmp_path}/v/lib/../../victim.txt", "victim.txt"):
        folder = craft(jr.journals_dir() / "20261201-000001-c0ffee", str(python), path)
        res = sd("fix", "--rollback", folder.name)
        assert res.returncode == 4, (path, res.returncode, res.stdout, res.stderr)
        assert victim.read_text() == "mine\n" and oct(victim.stat().st_mode & 0o7777) == "0o644", path
        shutil.rmtree(folder)
    # inside the target, the same journal restores (what a real apply records)
    inside = f"{tmp_path}/v/lib/restored.txt"
    folder = craft(jr.journals_dir() / "20261201-000002-c0ffee", str(python), inside)
    res = sd("fix", "--rollback", folder.name)
    assert res.returncode == 0 and Path(inside).read_text() == "written by a crafted journal\n", res.stderr
    assert f"rolling back journal {folder.name} of {python} (" in res.stderr
    assert res.stdout.startswith(f"journal {folder.name} of {python} rolled back\n")
    shutil.rmtree(folder)
    folder = craft(jr.journals_dir() / "20261201-000002-c0ffee", str(python), inside)
    body = json.loads(sd("fix", "--rollback", folder.name, "--format", "json").stdout)["result"]
    assert body["target"] == str(python) and body["status"] == "rolled back"


def test_a_link_in_a_journal_is_refused_before_anything_is_read_through_it(tmp_path):
    python = bare_venv(tmp_path)
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY\n")
    inside = tmp_path / "v" / "lib" / "leak.txt"
    folder = craft(jr.journals_dir() / "20261201-000003-c0ffee", str(python), str(inside), copy="copies/dists/1")
    os.symlink(secret, folder / "copies" / "dists" / "1")
    error(sd("fix", "--rollback", folder.name), 4, f"{folder}/copies/dists/1 is a symbolic link", "nothing was done from it")
    assert not inside.exists()
