"""What `fix` must refuse before it changes or plans anything, each in one line with its exit code, through the real
CLI: an `-o FILE` that cannot be written (refused before an apply or a rollback, not after it), a target check could
not probe (3, not "fix failed"), a `--rollback` folder that holds no journal (2, not a half-written journal's 0), an
`--env-file` or `--recipe` that cannot be read (2), and a FIFO where the unsettled mark lives (never waited on).
No registry: the targets are `python -m venv --without-pip` venvs and scripts, the journal is written by
journal.create itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor import unsettled
from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.inventory import target_key
from tests.fix.scenario import DATA, ENV_TEXT
from tests.fix.test_fix_targets import write_journal

SMALL = ["--no-kernels", "--matrix", str(DATA / "matrix"), "--fixes", str(DATA / "fixes")]


def sd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=timeout)


def error(p: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    """Exit `code` with one error line on stderr (after fix's progress lines) that holds every needle."""
    errors = [ln for ln in p.stderr.strip().splitlines() if not ln.startswith("sparkdoctor fix: ")]
    assert p.returncode == code and len(errors) == 1 and errors[0].startswith("sparkdoctor: error: "), (p.returncode, p.stderr)
    for needle in needles:
        assert needle in errors[0], errors[0]


def bare_venv(tmp_path: Path) -> Path:
    """A venv with no packages (no pip: fix plans with sparkdoctor's own pip; an env-file fix changes only the env file)."""
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv / "bin" / "python"


# ---- 1. -o FILE is judged before --yes / --rollback change anything --------------------------------------------

@pytest.mark.parametrize("where", ["missing-folder", "folder-is-a-file"])
def test_an_output_that_cannot_be_written_is_refused_before_the_apply(tmp_path, where):
    python = bare_venv(tmp_path)
    env_file = tmp_path / "vllm.env"
    env_file.write_text(ENV_TEXT)
    output = tmp_path / "no-such-dir" / "out.txt" if where == "missing-folder" else env_file / "out.txt"
    res = sd("fix", "--python", str(python), *SMALL, "--env-file", str(env_file), "--yes", "-o", str(output))
    error(res, 2, f"--output {output}")
    assert env_file.read_text() == ENV_TEXT, "refused before the apply: the env file is as it was"
    assert not jr.journals_dir().exists() or not list(jr.journals_dir().iterdir()), "no journal: nothing was applied"
    assert res.stdout == ""
    # the same apply with a writable -o: it is the -o that was refused (the env line goes, the report is in the file)
    good = tmp_path / "out.json"
    res = sd("fix", "--python", str(python), *SMALL, "--env-file", str(env_file), "--yes", "-o", str(good), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert "VLLM_NVFP4_GEMM_BACKEND" not in env_file.read_text() and json.loads(good.read_text())["journal"]
    # the apply says what it is doing (it was silent from the plan to the check after it: a minute for a family)
    progress = [ln for ln in res.stderr.splitlines() if ln.startswith("sparkdoctor fix: ")]
    assert progress[-3:-1] == ["sparkdoctor fix: writing the journal (what is there now, and the wheels of what the apply "
                               "replaces) ...", f"sparkdoctor fix: step 1 of 1: edit {env_file} ..."], res.stderr
    if where == "missing-folder":  # and so does the rollback (it was silent for the half minute a family takes)
        ident = json.loads(good.read_text())["journal"]
        back = sd("fix", "--rollback", ident)
        assert back.returncode == 0 and env_file.read_text() == ENV_TEXT, back.stderr
        assert back.stderr == (f"sparkdoctor fix: rolling back journal {ident} of {python} (checking it can restore, restoring, "
                               "verifying) ...\n")


def test_an_output_that_cannot_be_written_is_refused_before_the_rollback(tmp_path):
    ident = write_journal({"kind": "python", "python": sys.executable})
    res = sd("fix", "--rollback", ident, "-o", str(tmp_path / "missing" / "out.txt"), "--format", "json")
    error(res, 2, "--output", "does not exist")
    assert jr.load(ident).status() == "applied", "refused before the rollback: the journal was not touched"


# ---- 2. a target check could not probe: exit 3, before the inventory -------------------------------------------

@pytest.mark.parametrize("yes", [False, True])
def test_a_target_that_cannot_be_probed_is_exit_3_not_fix_failed(tmp_path, yes):
    script = tmp_path / "false.sh"
    script.write_text("#!/bin/sh\nexit 1\n")
    script.chmod(0o755)
    res = sd("fix", "--python", str(script), *SMALL, *(["--yes"] if yes else []))
    error(res, 3, "the target could not be probed", "exited 1", "nothing was changed")
    body = json.loads(sd("fix", "--python", str(script), *SMALL, "--format", "json").stdout)
    assert body["exit_code"] == 3 and body["errors"][0]["code"] == "unprobeable"


# ---- 3. --rollback FOLDER that holds no journal -----------------------------------------------------------------

def test_rollback_of_a_folder_without_a_journal_is_no_such_journal(tmp_path):
    empty = tmp_path / "not-a-journal"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    error(sd("fix", "--rollback", str(empty)), 2, f"{empty}: no such fix journal")
    # a real half-written journal (create began it: copies/ and wheels/, no journal.json yet) is still one
    half = tmp_path / "20261123-000000-abcdef"
    (half / "copies").mkdir(parents=True)
    (half / "wheels").mkdir()
    res = sd("fix", "--rollback", str(half))
    assert res.returncode == 0 and "half-written" in res.stdout and "nothing was changed" in res.stdout, res.stderr


# ---- 4. --env-file and --recipe that cannot be read: exit 2, one line naming the option -------------------------

def _odd(tmp_path: Path, kind: str) -> Path:
    if kind == "missing":
        return tmp_path / "nonexist" / "x.toml"
    if kind == "fifo":
        os.mkfifo(tmp_path / "pipe")
        return tmp_path / "pipe"
    if kind == "folder":
        return tmp_path
    if kind == "not-toml":
        (tmp_path / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
        return tmp_path / "passwd"
    if kind == "no-command":
        (tmp_path / "r.toml").write_text('name = "r"\n')
        return tmp_path / "r.toml"
    return Path("/dev/zero")


@pytest.mark.parametrize("kind", ["missing", "device", "fifo", "folder"])
def test_an_env_file_that_cannot_be_read_is_a_usage_error(tmp_path, kind):
    path = _odd(tmp_path, kind)
    error(sd("fix", "--python", sys.executable, *SMALL, "--env-file", str(path), timeout=60), 2, f"--env-file {path}")


@pytest.mark.parametrize("kind", ["missing", "device", "fifo", "folder", "not-toml", "no-command"])
def test_a_recipe_that_cannot_be_read_is_a_usage_error(tmp_path, kind):
    path = _odd(tmp_path, kind)
    error(sd("fix", "--python", sys.executable, *SMALL, "--recipe", str(path), timeout=60), 2, f"--recipe {path}")


def test_a_readable_recipe_and_env_file_still_plan(tmp_path):
    recipe = tmp_path / "serve.toml"
    recipe.write_text('command = ["vllm", "serve", "m"]\n')
    env_file = tmp_path / "vllm.env"
    env_file.write_text(ENV_TEXT)
    res = sd("fix", "--python", str(bare_venv(tmp_path)), *SMALL, "--recipe", str(recipe), "--env-file", str(env_file))
    assert res.returncode == 0 and f"edit {env_file}" in res.stdout and "-VLLM_NVFP4_GEMM_BACKEND" in res.stdout, res.stderr


# ---- 5. a FIFO at the unsettled mark is a damaged mark, never waited on ------------------------------------------

def _fifo_mark(python: Path) -> Path:
    key = target_key({"kind": "python", "python": str(python)})
    path = unsettled._path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def test_a_fifo_mark_reads_as_damaged_at_once(tmp_path):
    path = _fifo_mark(Path(sys.executable))

    def waited(signum, frame):
        raise AssertionError("unsettled.read waited on the FIFO")

    old = signal.signal(signal.SIGALRM, waited)
    signal.alarm(20)  # the read that blocked (path.read_text on a FIFO with no writer) fails here instead of hanging
    try:
        assert unsettled.read(target_key({"kind": "python", "python": sys.executable})) == {"damaged": str(path)}
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_fifo_mark_does_not_hang_check_or_fix(tmp_path):
    python = bare_venv(tmp_path)
    path = _fifo_mark(python)
    res = sd("check", "--python", str(python), "--no-kernels", "--timeout", "30", "--format", "json", timeout=90)
    findings = {f["id"]: f for f in json.loads(res.stdout)["findings"]}
    assert "fix-unfinished" in findings and str(path) in json.dumps(findings["fix-unfinished"]), res.stdout[-2000:]
    res = sd("fix", "--python", str(python), *SMALL, timeout=90)
    assert res.returncode in (0, 1) and "Target:" in res.stdout, res.stderr


def test_a_dry_run_that_reached_no_index_says_so_and_changed_nothing():
    """pip's retry warnings, then "No matching distribution" for a release that exists: the index did not answer
    (a read timeout or a reset prints no "Could not fetch URL" at pip's default verbosity, only its retries)."""
    from sparkdoctor import proc
    from sparkdoctor.fix.installers import _fail
    from sparkdoctor.fix.interface import UnchangedError
    from tests.test_stacks_resolve import PIP_OFFLINE

    err = _fail("the dry run", proc.ProcResult(["pip"], 1, "", PIP_OFFLINE, 1.0), dry_run=True)
    assert isinstance(err, UnchangedError) and "the package index cannot be reached" in str(err), str(err)
