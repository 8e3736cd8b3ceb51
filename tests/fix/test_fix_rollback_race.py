"""A link planted while `fix --rollback` runs is refused at the write, not followed. The rollback checks, before
anything changes, that every path it writes lands inside the target (test_fix_rollback_contained); its writes come
after pip's reinstall. Someone who can write the venv planted a link in between: the journal's copies were written
through it, outside the venv, and the verification read them back through the same link (exit 0). Raced
deterministically: the rollback stops itself (SIGSTOP, SPARKDOCTOR_FIX_STOP_AT) right after pip's reinstall, or
before its first reverse, the link is planted, then SIGCONT."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable

from sparkdoctor.fix import journal as jr
from tests.fix import scenario
from tests.fix.test_fix_journal_trust import error
from tests.fix.test_fix_targets import sd


def held_rollback(journal: str, boundary: str, plant: Callable[[], None]) -> subprocess.CompletedProcess:
    """`fix --rollback JOURNAL` stopped at its boundary (waitpid WUNTRACED: no polling, no clock), `plant()` run while
    it is held, then let go."""
    return held(["fix", "--rollback", journal], f"rollback:{boundary}", plant)


def held(args: list[str], stop_at: str, plant: Callable[[], None], **env: str) -> subprocess.CompletedProcess:
    """`sparkdoctor ARGS` stopped where SPARKDOCTOR_FIX_STOP_AT=stop_at says, `plant()` run while it is held, then let go."""
    argv = [sys.executable, "-m", "sparkdoctor", *args]
    env = {**os.environ, **env, "SPARKDOCTOR_FIX_STOP_AT": stop_at}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as p:
        try:
            _pid, status = os.waitpid(p.pid, os.WUNTRACED)
            assert os.WIFSTOPPED(status), f"it ended before {stop_at}"
            plant()
            os.kill(p.pid, signal.SIGCONT)
            out, err = p.communicate(timeout=600)
        finally:
            if p.poll() is None:
                p.kill()
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def test_a_folder_linked_out_of_the_venv_after_the_reinstall_is_not_written_through(applied_again, tmp_path):
    python, env_file, pins, before, _after, journal = applied_again
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    outside = tmp_path / "outside"
    outside.mkdir()
    seen: dict = {}

    def plant() -> None:  # after pip reinstalled idna from the journal's wheel, before the journal's copies are written
        shutil.move(str(site / "idna"), outside / "idna")
        (site / "idna").symlink_to(outside / "idna")
        seen["outside"] = scenario.snapshot(outside)

    res = held_rollback(journal.name, "reinstalled", plant)
    error(res, 4, f"journal {journal.name}: {site}/idna/", f"not written: {site}/idna is a symbolic link",
          "this write follows no link", "the rollback stopped at this write",
          f"remove the link, then run `sparkdoctor fix --rollback {journal.name}` again")
    assert scenario.snapshot(outside) == seen["outside"], "nothing was written through the link"
    assert jr.load(journal.name).status() == "rollback interrupted"

    (site / "idna").unlink()  # the link removed, the folder put back: the rollback finishes
    shutil.move(str(outside / "idna"), site / "idna")
    again = sd("fix", "--rollback", journal.name)
    assert again.returncode == 0 and "rolled back" in again.stdout, again.stdout + again.stderr
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []


def test_an_edited_file_replaced_by_a_link_after_the_check_is_not_written_through(applied_again, tmp_path):
    """The env file a fix edited may lie anywhere: the rollback writes it where the check found it, every link then
    followed; one planted in its place afterwards (to another file the rollback's user can write) is refused."""
    python, env_file, pins, _before, _after, journal = applied_again
    other = tmp_path / "other.txt"
    other.write_text("another file\n")

    def plant() -> None:
        env_file.rename(tmp_path / "env.moved")
        env_file.symlink_to(other)

    res = held_rollback(journal.name, "start", plant)
    error(res, 4, f"journal {journal.name}: {env_file}: not written: it is a symbolic link", "the rollback stopped")
    assert other.read_text() == "another file\n" and env_file.is_symlink()
    assert jr.load(journal.name).status() == "rollback interrupted"


def test_the_rollback_of_a_failed_apply_writes_through_no_link_either(wheels, tmp_path, monkeypatch):
    """The apply's installer fails at step 5 and the apply rolls itself back; after pip's reinstall in that automatic
    rollback, before the journal's copies (the hand-edited idna/core.py) are written, idna's folder is moved out of the
    venv and linked back. The copy is not written through the link: the automatic rollback stops with the link named
    and `fix --rollback` finishes once it is gone."""
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    python = scenario.make_target(tmp_path / "target", "pip", wheels)
    env_file, pins = scenario.files_for(tmp_path / "target")
    before = scenario.state(python, [env_file, pins])
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    outside = tmp_path / "outside"
    outside.mkdir()
    seen: dict = {}

    def plant() -> None:
        shutil.move(str(site / "idna"), outside / "idna")
        (site / "idna").symlink_to(outside / "idna")
        seen["outside"] = scenario.snapshot(outside)

    data = scenario.DATA
    res = held(["fix", "--python", str(python), "--no-kernels", "--matrix", str(data / "matrix"), "--fixes", str(data / "fixes"),
                "--env-file", str(env_file), "--yes"], "auto-rollback:reinstalled", plant,
               PIP_CONSTRAINT=str(pins), SPARKDOCTOR_FIX_FAULT="bad-version:5")
    assert res.returncode != 0 and "the automatic rollback failed too" in res.stderr, res.stdout + res.stderr
    assert f"{site}/idna is a symbolic link" in res.stderr and "follows no link" in res.stderr, res.stderr
    assert scenario.snapshot(outside) == seen["outside"], "nothing was written through the link"
    (journal,) = scenario.journals(tmp_path / "state")
    assert jr.load(journal.name).status() == "rollback interrupted"

    (site / "idna").unlink()
    shutil.move(str(outside / "idna"), site / "idna")
    again = scenario.fix_cli(None, "--rollback", journal.name, env={"PIP_CONSTRAINT": str(pins)})
    assert again.returncode == 0 and "rolled back" in again.stdout, again.stdout + again.stderr
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []
