"""`matrix track --apply` writing into a matrix folder on a disk that fills up mid-write (RLIMIT_FSIZE stands in for
a full disk: the write fails with EFBIG after the bytes the limit lets through, as ENOSPC would)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

from tests.test_track_apply_concurrent import registry
from tests.test_tracking import write_matrix

LIMIT = 64 * 1024  # bytes a process of this test may write into one file


def test_a_write_that_fails_leaves_every_matrix_file_whole(tmp_path):
    """The edited file used to be truncated and written in place: a full disk left demo.toml cut at the limit, its
    entry gone (the cut fell in the comments before it, so the file still loaded, one entry fewer)."""
    folder = write_matrix(tmp_path, ">=0.2.0", tracked="0.1.0")
    demo = folder / "demo.toml"
    demo.write_text("# notes\n" * (2 * LIMIT // 8) + demo.read_text())  # a matrix file larger than the disk lets through
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with registry(tmp_path) as env:
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "track", "--matrix", str(folder), "--apply",
                               "--format", "json"], capture_output=True, text=True, timeout=120, env=env, check=False,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT)))
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # whole, and no temporary file left beside them
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("sparkdoctor: error: --apply: ") and done.stderr.count("\n") == 1, done.stderr
    assert "left as they were" in done.stderr
    assert json.loads(done.stdout)["errors"][0]["code"] == "output"


def test_an_apply_that_fits_edits_the_files_in_place(tmp_path):
    """The same run with room on the disk: the bound closes at 0.4.0 and tracked moves, the rest kept byte for byte."""
    folder = write_matrix(tmp_path, ">=0.2.0", tracked="0.1.0")
    with registry(tmp_path) as env:
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "track", "--matrix", str(folder), "--apply",
                               "--format", "json"], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 1, done.stderr
    assert '"demo" = ">=0.2.0,<0.4.0"' in (folder / "demo.toml").read_text()
    assert 'demo = "0.4.0"' in (folder / "tracking.toml").read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["demo.toml", "tracking.toml"]
