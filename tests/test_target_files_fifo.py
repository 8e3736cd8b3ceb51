"""The target's file operations (targets/fileops.py, run here by LocalFiles and inside a container by ContainerFiles)
open what they read without blocking and judge it by fstat of what was opened: `export` and `export_tar` checked
os.path.isfile before a blocking open, so a FIFO swapped in between held the apply until its time limit, and `read`
(a pin file, a recipe) opened a FIFO blocking outright. Each now reports one line naming the path.

Each call runs in a child with a real FIFO that nothing writes, bounded by a CPU-time limit and a timeout: on the code
before, the child waited on the FIFO and was killed."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SWAPPED = """
import os, sys
from sparkdoctor.targets import fileops, files
fifo, dest = sys.argv[1], sys.argv[2]
os.path.isfile = lambda p: True  # the stat said "a file"; a FIFO was swapped in before the open
"""


def _child(code: str, *args: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True, text=True,
                          timeout=30, check=False, cwd=REPO,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, (30, 30)))


@pytest.mark.parametrize(("copy", "said"), [
    ("files.LocalFiles().export([fifo], dest)\nexcept files.FileError as exc:", "cannot copy"),
    ("import io; fileops.export_tar([fifo], io.BytesIO())\nexcept fileops.OpError as exc:", "cannot read"),
], ids=["export", "export_tar"])
def test_a_copy_of_a_fifo_swapped_in_after_the_check_is_one_line_not_a_wait(tmp_path, copy, said):
    os.mkfifo(fifo := tmp_path / "a.so")
    done = _child(SWAPPED + f"""
try:
    {copy}
    print(exc)
""", fifo, tmp_path)
    assert done.returncode == 0 and done.stdout == f"{fifo}: {said}: not a regular file (a FIFO, a device or a folder)\n", done


def test_read_and_hash_of_a_fifo_are_refused_not_waited_on(tmp_path):
    os.mkfifo(fifo := tmp_path / "pins.txt")
    done = _child(SWAPPED + """
try:
    fileops.read(fifo)
except fileops.OpError as exc:
    print(exc)
try:
    fileops.sha256_of(fifo)  # what info(with_hash=True) calls once its lstat said "a file"
except OSError as exc:
    print(exc.strerror)
""", fifo, tmp_path)
    assert done.returncode == 0, done
    assert done.stdout == (f"{fifo}: cannot read: not a regular file (a FIFO, a device or a folder)\n"
                           "not a regular file (a FIFO, a device or a folder)\n"), done


def test_a_regular_file_and_a_link_to_one_still_export(tmp_path):
    from sparkdoctor.targets.files import LocalFiles

    (real := tmp_path / "a.so").write_bytes(b"\x7fELF")
    (link := tmp_path / "b.so").symlink_to(real)
    (out := tmp_path / "out").mkdir()
    got = LocalFiles().export([str(real), str(link)], out)
    assert [(out / got[str(p)]["name"]).read_bytes() for p in (real, link)] == [b"\x7fELF", b"\x7fELF"]
