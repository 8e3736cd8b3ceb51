"""Attacks on the file inputs that were read unbounded or blocking, and on the file bench writes (issue 40, items
4 and 10): FIFOs with no writer, /dev/zero, a folder and sparse files as `bench --reference-file`, a `-c` include
and PIP_CONSTRAINT in a constraints file, `fix --env-file` (a mod folder and a mod's site copy: tests/mods/test_mods_bounded.py). Each is refused
or stood for in one line, in bounded time (hang_guard turns a hang into a failure; the FIFOs make the code before
hang rather than fill memory), and `bench --reference` never replaces anything but a regular file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.bench import references
from sparkdoctor.bench.correctness import Answer
from sparkdoctor.fix.envfile import read_env_file
from sparkdoctor.fix.interface import FixError
from tests.hostile import hang_guard
from tests.test_constraints import errors, make_ctx, pins, write

GUARD_S = 20
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def odd(kind: str, tmp_path: Path, fifo: Path) -> Path:
    return {"fifo": fifo, "zero": Path("/dev/zero"), "folder": tmp_path}[kind]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


# ---- bench --reference-file ----------------------------------------------------------------------------------


def test_a_reference_is_written_only_as_a_regular_file(tmp_path, fifo):
    answer = Answer(prompt="p", text="t")
    assert "not a regular file" in (references.save(fifo, [answer], {}) or "")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the FIFO: not replaced by a file
    assert "is a directory" in (references.save(tmp_path, [answer], {}) or "")
    assert references.save(tmp_path / "ref.json", [answer], {"model": "m"}) is None
    assert references.load(tmp_path / "ref.json")[0][0].text == "t"


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_a_reference_to_compare_with_is_read_only_from_a_regular_file(tmp_path, fifo, kind):
    with hang_guard(GUARD_S):
        answers, why = references.load(odd(kind, tmp_path, fifo))
    assert answers is None and "not a regular file" in why or "directory" in why, why


@pytest.mark.parametrize("args", [("--reference", "--reference-file", "{fifo}"), ("--reference", "--reference-file", "/dev/null"),
                                  ("--reference-file", "{fifo}"), ("--reference-file", "/dev/zero"), ("--reference-file", "{tmp}")])
def test_bench_refuses_an_odd_reference_file_before_measuring(tmp_path, fifo, args):
    """The server does not exist: the refusal comes first (exit 2, one line), and nothing is replaced."""
    argv = [a.format(fifo=fifo, tmp=tmp_path) for a in args]
    res = cli("bench", "--url", "http://127.0.0.1:9/v1", "--model", "m", *argv)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--reference-file" in res.stderr, (res.returncode, res.stderr)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)


# ---- constraints: -c includes and PIP_CONSTRAINT ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_an_include_or_pip_constraint_that_is_no_regular_file_is_one_error_and_reading_goes_on(tmp_path, fifo, kind):
    target = odd(kind, tmp_path, fifo)
    top = write(tmp_path / "c.txt", f"foo==1.0\n-c {target}\nbar==2.0\n")
    ctx = make_ctx(files=[top])
    with hang_guard(GUARD_S):
        got = pins(ctx)
    assert [p[0] for p in got] == ["foo", "bar"]
    assert any(f"cannot read {target}" in e and ("not a regular file" in e or "directory" in e) for e in errors(ctx)), errors(ctx)
    ctx = make_ctx(env={"PIP_CONSTRAINT": f"{target} {top}"})
    with hang_guard(GUARD_S):
        assert [p[0] for p in pins(ctx)] == ["foo", "bar"]
    assert any(f"cannot read {target}" in e for e in errors(ctx)), errors(ctx)


def test_a_constraints_file_over_the_limit_is_refused_not_read_whole(tmp_path):
    big = tmp_path / "big.txt"
    with open(big, "wb") as fh:  # sparse
        fh.truncate(64 * 1024 * 1024 * 1024)
    ctx = make_ctx(files=[write(tmp_path / "c.txt", f"-r {big}\nfoo==1.0\n")])
    with hang_guard(GUARD_S):
        assert [p[0] for p in pins(ctx)] == ["foo"]
    assert any("larger than 16 MiB" in e for e in errors(ctx)), errors(ctx)


# ---- fix --env-file -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_an_env_file_that_is_no_regular_file_is_refused_in_one_line(tmp_path, fifo, kind):
    with hang_guard(GUARD_S), pytest.raises(FixError, match="cannot read the env file: .*(not a regular file|directory)"):
        read_env_file(odd(kind, tmp_path, fifo))


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_check_names_why_a_constraints_file_is_refused(tmp_path, fifo, kind):
    res = cli("check", "-c", str(odd(kind, tmp_path, fifo)), "--no-kernels")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "not a regular file" in res.stderr, res.stderr
